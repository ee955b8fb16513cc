import Foundation
import Testing
import VeneerFuzzing

/// Every file of every fuzz corpus (Fuzz/Corpus/TARGET, kept in the repository) through the
/// same entry function its libFuzzer executable runs: what fuzzing once found stays fixed.
@Suite("Fuzz corpora")
struct CorpusReplayTests {
    static let corpusRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Fuzz/Corpus").standardizedFileURL

    static func files(_ target: FuzzTarget) throws -> [URL] {
        let directory = corpusRoot.appendingPathComponent(target.rawValue)
        return try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .filter { !$0.lastPathComponent.hasPrefix(".") }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    @Test("each corpus file runs clean through its target", arguments: FuzzTarget.allCases)
    func replay(target: FuzzTarget) throws {
        let files = try Self.files(target)
        #expect(files.count >= 5, "the \(target.rawValue) corpus is missing or nearly empty")
        for file in files {
            let bytes = try Data(contentsOf: file)
            bytes.withUnsafeBytes { bytes in
                do {
                    try target.run(bytes)
                } catch {
                    Issue.record("\(target.rawValue)/\(file.lastPathComponent): \(error)")
                }
            }
        }
    }
}
