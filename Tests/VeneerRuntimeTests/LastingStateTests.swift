import Testing
import VeneerCore

@Suite("Carried state: one object per key for the life of an instance (lasting)")
struct LastingStateTests {
    final class Resource: Sendable {}

    let key = CarriedKey.shared("test.file", "/tmp/x.har")

    @Test("a chain that dropped the key and one that takes it again get the object a request of an older chain still holds")
    func keptWhileHeld() throws {
        let first = CarriedState()
        let inFlight = try first.lasting(for: key) { Resource() }
        // A chain without the key (a switch to an environment without record)...
        let without = first.next()
        #expect(without.held(key) == nil)
        // ...and the one after it, while a request of the first still holds the object.
        let again = without.next()
        var made = 0
        let taken = try again.lasting(for: key) { made += 1; return Resource() }
        #expect(taken === inFlight && made == 0)
        #expect(again.held(key) as? Resource === inFlight, "held like any carried state")
        // A carrier of another instance never shares it.
        #expect(try CarriedState().lasting(for: key) { Resource() } !== inFlight)
    }

    /// The chain after one without the key, once the chains that held it are gone.
    func chainAfterRelease() throws -> (CarriedState, ObjectIdentifier) {
        let first = CarriedState()
        let made = try first.lasting(for: key) { Resource() }
        return (first.next().next(), ObjectIdentifier(made))
    }

    @Test("once nothing holds it, the next chain that asks makes a new one")
    func goneWhenReleased() throws {
        let (later, _) = try chainAfterRelease()
        var made = 0
        _ = try later.lasting(for: key) { made += 1; return Resource() }
        #expect(made == 1)
    }
}
