import HTTPTypes
import Logging
import VeneerCore

/// A command a decorator adds to the command line (`veneer purge`, `veneer unblock`): it acts
/// on the running instance of an environment through the decorator's admin route, or, when
/// none runs, on the decorator's stores. The decorator's factory declares it
/// (``DecoratorFactory/commands``); the command line offers every registered one, and the
/// runtime runs it with a ``CommandLineContext``, once per environment, with the options of
/// every entry of the decorator in the environment's chain.
public struct CommandLineAction: Sendable {
    /// What the command takes besides `--config` and `-e`: one operand, or `--all` instead
    /// of it where ``allHelp`` says what that means.
    public struct Operand: Sendable {
        /// Its name in the usage line (`path`, `account`).
        public let name: String
        /// What it is.
        public let help: String
        /// What `--all` does instead of an operand; nil: the operand is required, and there is no `--all`.
        public let allHelp: String?

        /// An operand called `name`; `all` describes `--all`, if the command takes it instead.
        public init(_ name: String, help: String, all allHelp: String? = nil) {
            self.name = name
            self.help = help
            self.allHelp = allHelp
        }
    }

    /// The command's name (`purge`).
    public let name: String
    /// One line on what it does.
    public let abstract: String
    /// More about it: what the operand may be, what the exit statuses mean.
    public let discussion: String
    /// Its operand.
    public let operand: Operand
    private let perform: @Sendable (any CommandLineContext, [any Sendable]) async throws -> CommandLineOutcome

    /// A command whose work, `perform`, is given the context and the decoded options of each
    /// entry of the decorator in the environment's chain (never none: then the runtime answers
    /// that the environment has no such decorator).
    public init<Options: Sendable>(
        name: String, abstract: String, discussion: String = "", operand: Operand,
        perform: @escaping @Sendable (any CommandLineContext, [Options]) async throws -> CommandLineOutcome
    ) {
        self.name = name
        self.abstract = abstract
        self.discussion = discussion
        self.operand = operand
        self.perform = { context, options in try await perform(context, options.compactMap { $0 as? Options }) }
    }

    /// Runs the command on `context`'s environment, whose entries of the decorator hold `options`.
    public func run(_ context: any CommandLineContext, options: [any Sendable]) async throws -> CommandLineOutcome {
        try await perform(context, options)
    }
}

/// What a ``CommandLineAction`` is given: its environment and operand, the environment's
/// running instance, and its stores.
public protocol CommandLineContext: Sendable {
    /// The environment it acts on.
    var spec: EnvironmentSpec { get }
    /// The operand given; nil with `--all`.
    var operand: String? { get }
    /// Where warnings go (standard error).
    var logger: Logger { get }

    /// `method` to `/-/` + `path` of the admin API of the environment's running instance (the
    /// instance of the same file and environment, found as `veneer reload` finds it), with
    /// `query` after the `environment=` that makes it check what it serves. nil when no such
    /// instance answers (``instanceMissing`` says why) or it stopped answering; another
    /// file's instance at the address is never asked (a warning says so).
    func askInstance(_ method: HTTPRequest.Method, _ path: String, query: [(String, String)], timeout: Duration) async -> AdminAnswer?

    /// Why no instance of the environment was asked, for a person (after ``askInstance(_:_:query:timeout:)`` gave nil).
    func instanceMissing() async -> String

    /// Runs `body` on the store called `name` of the environment's `stores:`, opened for it
    /// (its connections running meanwhile) and closed after; nil without running `body`
    /// when there is no such store (`memory`, whose content ends with its process).
    func withStore<T: Sendable>(named name: String, _ body: (any KeyValueStore) async throws -> T) async throws -> T?
}

/// What an admin API answered.
public struct AdminAnswer: Sendable {
    /// The status code.
    public let status: Int
    /// The body, when it was JSON.
    public let body: JSONValue?
    /// Where the instance that answered listens (`127.0.0.1:9000`).
    public let address: String

    /// An answer from the instance at `address`.
    public init(status: Int, body: JSONValue?, address: String) {
        self.status = status
        self.body = body
        self.address = address
    }
}

/// How a ``CommandLineAction`` ended: what it prints, and the exit status.
public struct CommandLineOutcome: Sendable, Equatable {
    /// How it ended.
    public enum Kind: Sendable, Equatable {
        /// Done: the message goes to standard output, exit 0.
        case done
        /// Not done: the message goes to standard error, exit `status`.
        case failed(status: Int32)
        /// The operand is not one the command takes: the message and the usage go to
        /// standard error, exit 64 (EX_USAGE).
        case usage
    }

    /// How it ended.
    public let kind: Kind
    /// What to print.
    public let message: String

    /// Done; `message` to standard output.
    public static func done(_ message: String) -> CommandLineOutcome { CommandLineOutcome(kind: .done, message: message) }

    /// Not done; `message` to standard error, exit `status`.
    public static func failed(_ message: String, status: Int32 = 1) -> CommandLineOutcome {
        CommandLineOutcome(kind: .failed(status: status), message: message)
    }

    /// A usage error: `message`, exit 64.
    public static func usage(_ message: String) -> CommandLineOutcome { CommandLineOutcome(kind: .usage, message: message) }
}
