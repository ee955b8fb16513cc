import Synchronization
import VeneerConfig

/// The admin address of a running instance, recorded in the address file of the environment
/// serving (`STATE_DIR/run/ENV.admin`): written once the listeners are bound, moved to the
/// new environment's file by a switch (the old one goes: `-e OLD` must not find an
/// instance that no longer serves it), removed at exit.
final class AdminAddressRecord: Sendable {
    private struct State {
        var file: AdminAddressFile
        var address: ListenAddress?
    }
    private let state: Mutex<State>

    init(stateDirectory: String, environment: String) {
        state = Mutex(State(file: AdminAddressFile(stateDirectory: stateDirectory, environment: environment)))
    }

    /// The file of the environment serving.
    var file: AdminAddressFile { state.withLock { $0.file } }

    /// Records where the admin API listens.
    func record(_ address: ListenAddress) throws {
        try state.withLock { state in
            state.address = address
            try state.file.write(address)
        }
    }

    /// The environment serving is now `environment`: its file gets the address (once known),
    /// the previous one is removed.
    func move(stateDirectory: String, environment: String) throws {
        try state.withLock { state in
            let next = AdminAddressFile(stateDirectory: stateDirectory, environment: environment)
            guard next.path != state.file.path else { return }
            // Written before the old one goes: a failure leaves the old file, still removed at exit.
            if let address = state.address { try next.write(address) }
            state.file.remove()
            state.file = next
        }
    }

    /// Removes the file of the environment serving (at exit).
    func remove() {
        state.withLock { $0.file.remove() }
    }
}
