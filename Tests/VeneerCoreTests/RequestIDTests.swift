import Testing
import VeneerCore

@Suite("generated request ids")
struct RequestIDTests {
    @Test("13 characters of 0-9a-v, acceptable as a caller's id, and distinct from one request to the next")
    func shape() {
        let ids = (0..<100_000).map { _ in RequestID.generate() }
        let alphabet = Set("0123456789abcdefghijklmnopqrstuv")
        #expect(ids.allSatisfy { $0.count == 13 && $0.allSatisfy(alphabet.contains) && RequestID.isAcceptable($0) })
        #expect(Set(ids).count == ids.count)
        // The digits vary: every character of the alphabet turns up in the last place.
        #expect(Set(ids.map { $0.last! }) == alphabet)
    }
}
