import Testing
@testable import VeneerDecorators

/// The cache's memory index against a plain model (a dictionary and a use-ordered array):
/// every lookup, order and size agree after long runs of sets, gets and removals, which move
/// keys about in its open-addressing table (growth, backward-shift deletion, reused slots).
@Suite("cache: the LRU index")
struct LRUIndexTests {
    /// A deterministic generator, so that a failure can be replayed.
    private struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// A value with a size of its own, as the cache's entries have.
    private struct Item: LRUSized, Equatable {
        let value: Int
        let size: Int
    }

    @Test("agrees with a model through 20,000 random operations on up to 600 keys", arguments: [1, 2, 3])
    func model(seed: UInt64) {
        var random = SplitMix(state: seed)
        var index = LRUIndex<Item>()
        var values: [String: (value: Int, size: Int)] = [:]
        var order: [String] = []  // oldest first
        // Short keys (inline strings) and long ones, as cache keys are.
        let keys = (0..<600).map { $0 % 3 == 0 ? "I/posts/\($0) " : "L/posts userId=\($0)&_limit=10&_page=\($0 % 7) " }
        func touch(_ key: String) {
            order.removeAll { $0 == key }
            order.append(key)
        }
        for step in 0..<20_000 {
            let key = keys[Int.random(in: 0..<(step < 5_000 ? 600 : 200), using: &random)]
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4:
                let size = Int.random(in: 1..<1_000, using: &random)
                index.set(key, Item(value: step, size: size))
                values[key] = (step, size)
                touch(key)
            case 4..<6:
                #expect(index.get(key)?.value == values[key]?.value)
                if values[key] != nil { touch(key) }
            case 6:
                #expect(index.peek(key)?.value == values[key]?.value)
            case 7, 8:
                #expect(index.remove(key)?.value == values.removeValue(forKey: key)?.value)
                order.removeAll { $0 == key }
            default:
                let oldest = index.removeOldest()
                #expect(oldest?.key == order.first)
                if let first = order.first {
                    #expect(oldest?.value.value == values.removeValue(forKey: first)?.value)
                    order.removeFirst()
                }
            }
            #expect(index.count == values.count)
            #expect(index.totalSize == values.values.reduce(0) { $0 + $1.size })
        }
        for key in keys { #expect(index.peek(key)?.value == values[key]?.value) }
        #expect(Set(index.keys { _ in true }) == Set(values.keys))
        #expect(Set(index.keys { $0.hasPrefix("I/") }) == Set(values.keys.filter { $0.hasPrefix("I/") }))
        var swept: [String: Int] = [:]
        var slot = 0
        while let (entries, next) = index.chunk(from: slot, limit: 7) {
            for entry in entries { swept[entry.key] = entry.value.value }
            slot = next
        }
        #expect(swept == values.mapValues(\.value))
        // Emptied oldest first, in the model's order.
        var drained: [String] = []
        while let (key, _) = index.removeOldest() { drained.append(key) }
        #expect(drained == order)
        #expect(index.count == 0 && index.totalSize == 0)
    }

    @Test("100,000 keys set, every other removed, the rest found and in order")
    func many() {
        var index = LRUIndex<Item>()
        for number in 0..<100_000 { index.set("I/posts/\(number) ", Item(value: number, size: 1)) }
        for number in stride(from: 0, to: 100_000, by: 2) { #expect(index.remove("I/posts/\(number) ")?.value == number) }
        #expect(index.count == 50_000 && index.totalSize == 50_000)
        var missing = 0
        for number in 0..<100_000 where (index.peek("I/posts/\(number) ") != nil) != (number % 2 == 1) { missing += 1 }
        #expect(missing == 0)
        #expect(index.removeOldest()?.key == "I/posts/1 ")
    }
}
