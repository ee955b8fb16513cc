import Synchronization

/// State that a reload carries over from one chain to the next: caches, token managers,
/// stores. A factory asks for its state under a ``CarriedKey``: its chain entry's own
/// (``CarriedKey/entry(_:_:)``, from ``BuildContext/entry``) or one shared by definition
/// (``CarriedKey/shared(_:_:)``). A reload that asks for a key the previous chain held gets
/// the very same object back; objects that no key of the new chain asked for are released
/// once the old chain has drained.
public final class CarriedState: Sendable {
    private struct State {
        var previous: [CarriedKey: any Sendable] = [:]
        var current: [CarriedKey: any Sendable] = [:]
        var onCommit: [@Sendable () async -> Void] = []
    }
    private let state = Mutex(State())
    /// What every carrier of one instance shares, from its first chain on: see ``lasting(for:make:)``.
    private let lineage: Lineage

    /// An empty carrier (the first chain).
    public init() {
        lineage = Lineage()
    }

    private init(lineage: Lineage) {
        self.lineage = lineage
    }

    /// The object kept under `key`, or a new one from `make`.
    public func value<T: Sendable>(for key: CarriedKey, make: () throws -> T) rethrows -> T {
        if let existing = state.withLock({ $0.current[key] ?? $0.previous[key] }) as? T {
            state.withLock { $0.current[key] = existing }
            return existing
        }
        let made = try make()
        state.withLock { $0.current[key] = made }
        return made
    }

    /// The object kept under `key` by this chain or offered by the previous one, without
    /// creating anything.
    public func existing(for key: CarriedKey) -> (any Sendable)? {
        state.withLock { state in
            guard let found = state.current[key] ?? state.previous[key] else { return nil }
            state.current[key] = found
            return found
        }
    }

    /// The one object under `key` for the life of the instance, whatever its chains: the one
    /// this chain or the one before holds, else one still alive elsewhere (a chain that no
    /// longer holds it but whose last requests still run: a switch to an environment without
    /// it and back, while a slow request is inside), else a new one from `make`. For state
    /// of which two must never exist at once, such as the writer of a file that writes at an
    /// offset it keeps. The object is held like any other carried state; the instance keeps
    /// only a weak reference to it, so it goes once nothing uses it.
    public func lasting<T: AnyObject & Sendable>(for key: CarriedKey, make: () throws -> T) throws -> T {
        if let existing = existing(for: key) as? T { return existing }
        let object = try lineage.objects.withLock { objects -> T in
            if let alive = objects[key]?.object as? T { return alive }
            let made = try make()
            objects = objects.filter { $0.value.object != nil }
            objects[key] = WeakObject(object: made)
            return made
        }
        state.withLock { $0.current[key] = object }
        return object
    }

    /// A carrier for the next chain: it offers what this one holds.
    public func next() -> CarriedState {
        let next = CarriedState(lineage: lineage)
        let held = state.withLock { $0.current }
        next.state.withLock { $0.previous = held }
        return next
    }

    /// The objects the previous chain held that this one did not take (to shut down).
    public func released() -> [any Sendable] {
        state.withLock { state in state.previous.filter { state.current[$0.key] == nil }.map(\.value) }
    }

    /// The objects this chain made itself (not taken from the previous one): what to
    /// release when the chain is not used after all (its build failed).
    public func fresh() -> [any Sendable] {
        state.withLock { state in state.current.filter { state.previous[$0.key] == nil }.map(\.value) }
    }

    /// What this chain holds under `key`, without taking anything from the previous chain.
    public func held(_ key: CarriedKey) -> (any Sendable)? {
        state.withLock { $0.current[key] }
    }

    /// Runs `action` once the chain built with this carrier serves (``commit()``), never if
    /// its build fails: for changes to state the serving chain shares (a token manager's
    /// options), which a reload that fails on another entry must leave as they were.
    public func whenCommitted(_ action: @escaping @Sendable () async -> Void) {
        state.withLock { $0.onCommit.append(action) }
    }

    /// The chain built with this carrier serves now: runs what its factories deferred, in order.
    public func commit() async {
        let actions = state.withLock { state in
            defer { state.onCommit.removeAll() }
            return state.onCommit
        }
        for action in actions { await action() }
    }

    /// The keys held by this chain.
    public var keys: [CarriedKey] { state.withLock { Array($0.current.keys) }.sorted { $0.description < $1.description } }
}

/// The objects of ``CarriedState/lasting(for:make:)``, by key, shared by every carrier of an instance.
private final class Lineage: Sendable {
    let objects = Mutex<[CarriedKey: WeakObject]>([:])
}

/// A reference that does not keep its object alive.
private struct WeakObject {
    weak var object: AnyObject?
}

/// Carried state that holds something to close (a file, a database pool) once no chain uses it.
public protocol CarriedResource: Sendable {
    /// Releases what it holds.
    func close() async
}

extension CarriedState {
    /// Everything this chain holds.
    public var all: [any Sendable] { state.withLock { Array($0.current.values) } }
}

/// Carried state with background work (a purge loop, a proactive token refresh): the
/// runtime runs ``run()`` from the moment a chain first takes it until no chain holds it
/// (then the task is cancelled and ``CarriedResource/close()`` called) or Veneer stops.
public protocol CarriedService: CarriedResource {
    /// The background loop; returns when cancelled.
    func run() async
}
