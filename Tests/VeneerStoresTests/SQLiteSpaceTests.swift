import Foundation
import Logging
import Testing
import VeneerCore
import VeneerStores
import VeneerTestSupport

/// What a disk cache's floor (`min_free`) asks of the sqlite store: to tell the space left on
/// its disk, to evict the oldest keys by size, and to give what they held back to the file
/// system, also on a disk full to the last byte.
@Suite("sqlite store: space on its disk")
struct SQLiteSpaceTests {
    static func fileSizes(_ path: String) -> Int {
        ["", "-wal"].reduce(0) { total, suffix in
            total + ((try? FileManager.default.attributesOfItem(atPath: path + suffix)[.size] as? Int) ?? 0)
        }
    }

    static func fill(_ store: SQLiteStore, count: Int, size: Int) async throws {
        for index in 0..<count {
            try await store.put("cache", String(format: "k%03d", index), StoredValue(bytes: [UInt8](repeating: UInt8(index % 251), count: size)), durable: false)
        }
    }

    @Test("evict removes the least recently used keys until their bytes add up; releaseSpace shrinks the files by what they held")
    func evictAndRelease() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = await SQLiteStore.open(path: directory + "/cache.sqlite", logger: quietLogger())
        defer { Task { await store.close() } }
        #expect(store.freeSpace() != nil)
        try await Self.fill(store, count: 40, size: 100_000)
        try await store.put("auth_refresh", "token", StoredValue(bytes: [1, 2, 3]), durable: true)
        _ = try await store.get("cache", "k000", now: Date())   // k000 is now the most recently used
        await store.releaseSpace()
        let before = Self.fileSizes(store.path)
        #expect(before > 4_000_000)

        #expect(try await store.evict("cache", bytes: 1_000_000) == 10)
        let left = try await store.list("cache", now: Date()).map(\.key)
        #expect(left.count == 30 && left.contains("k000") && !left.contains("k001") && left.contains("k011"), "\(left)")
        #expect(try await store.get("auth_refresh", "token", now: Date())?.bytes == [1, 2, 3], "another namespace is never evicted")

        await store.releaseSpace()
        let after = Self.fileSizes(store.path)
        #expect(before - after > 900_000, "freed pages went back to the file system: \(before) -> \(after)")
        #expect(FileManager.default.fileExists(atPath: store.path + ".reserve"), "a reserve for a full disk")
        #expect(try await store.list("cache", now: Date()).count == 30)
    }

    @Test("on a disk full to the last byte the store still evicts and gives space back (its reserve), and a durable save then works",
          .enabled(if: SmallDisk.canMount, Comment(rawValue: SmallDisk.skipReason)))
    func fullDisk() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let disk = try SmallDisk(at: directory + "/disk", size: "4m")
        defer { disk.unmount() }
        let store = await SQLiteStore.open(path: disk.path + "/veneer.sqlite", logger: quietLogger())
        defer { Task { await store.close() } }
        try await Self.fill(store, count: 10, size: 100_000)
        await store.releaseSpace()
        disk.fill()
        #expect(disk.free < 16 << 10)
        await #expect(throws: (any Error).self, "the disk is full") {
            try await store.put("auth_refresh", "token", StoredValue(bytes: [UInt8](repeating: 7, count: 4096)), durable: true)
        }
        #expect(try await store.evict("cache", bytes: 500_000) == 5)
        await store.releaseSpace()
        #expect(disk.free > 300_000, "free: \(disk.free)")
        try await store.put("auth_refresh", "token", StoredValue(bytes: [UInt8](repeating: 7, count: 4096)), durable: true)
        #expect(try await store.get("auth_refresh", "token", now: Date())?.bytes.count == 4096)
    }
}
