/// Runs reloads one at a time, in the order they were asked for: a second SIGHUP (or a
/// reload asked through the admin API) during a reload waits for its turn, suspended, not
/// spinning. The turn is held across the reload's suspensions (building a chain awaits
/// stores and files), which an actor's own isolation would not do: it only admits the next
/// caller when the current one leaves.
actor ReloadQueue {
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    /// Runs `body` once every reload asked for before it has finished.
    func run<T: Sendable>(_ body: @Sendable () async -> T) async -> T {
        if busy {
            await withCheckedContinuation { waiting.append($0) }
        } else {
            busy = true
        }
        let result = await body()
        // The turn passes straight to the next caller: nobody can slip in between.
        if !waiting.isEmpty {
            waiting.removeFirst().resume()
        } else {
            busy = false
        }
        return result
    }
}
