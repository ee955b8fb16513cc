import Foundation
import Testing
import VeneerTestSupport

/// The README's copies of what the program says, kept true: its shipped-configuration block
/// against `config/veneer.yaml`, its decorator and origin tables against `veneer decorators`,
/// its `bad.yaml` examples against `veneer check`, and its code layout against `Sources/`.
@Suite("README: the copies in it are what the program says")
struct ReadmeTests {
    static func readme() throws -> String {
        try String(contentsOfFile: packageRoot + "/README.md", encoding: .utf8)
    }

    /// The text of the fenced block (```` ```KIND ````) that follows `from` in `text`.
    static func fencedBlock(_ kind: String, in text: Substring) throws -> (body: String, rest: Substring) {
        let open = try #require(text.range(of: "```\(kind)\n"), "no ```\(kind) block")
        let close = try #require(text[open.upperBound...].range(of: "\n```\n"), "an unclosed ```\(kind) block")
        return (String(text[open.upperBound..<close.lowerBound]) + "\n", text[close.upperBound...])
    }

    /// The table rows of `section` (from its heading to the next one): first cell, whole row.
    static func tableRows(_ readme: String, section heading: String) throws -> [(name: String, row: String)] {
        let start = try #require(readme.range(of: "\n\(heading)\n"), "no section \(heading)")
        let rest = readme[start.upperBound...]
        let end = rest.range(of: "\n#")?.lowerBound ?? rest.endIndex
        return rest[..<end].split(separator: "\n").compactMap { line in
            guard line.hasPrefix("| `"), let close = line.dropFirst(3).firstIndex(of: "`") else { return nil }
            return (String(line[line.index(line.startIndex, offsetBy: 3)..<close]), String(line))
        }
    }

    @Test("the shipped-configuration block is config/veneer.yaml, byte for byte")
    func shippedConfiguration() throws {
        let readme = try Self.readme()
        let intro = try #require(readme.range(of: "The shipped `config/veneer.yaml`"))
        let block = try Self.fencedBlock("yaml", in: readme[intro.upperBound...]).body
        let file = try String(contentsOfFile: packageRoot + "/config/veneer.yaml", encoding: .utf8)
        #expect(block == file, "README.md's copy differs from config/veneer.yaml: copy the file into the block")
    }

    @Test("the decorator and origin tables list what veneer decorators lists, with every option")
    func decoratorTables() async throws {
        let listing = try await VeneerProcess.run(["decorators"])
        #expect(listing.status == 0)
        // `  NAME — summary` under "Decorators" and "Origins", then `      option  type: ...`.
        var listed: [String: [String: [String]]] = ["Decorators": [:], "Origins": [:]]
        var part = "", current = ""
        for line in listing.stdout.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.hasPrefix("Decorators") || line.hasPrefix("Origins") {
                part = String(line.prefix { $0 != " " })
            } else if line.hasPrefix("      ") {
                let option = line.drop { $0 == " " }.prefix { $0 != " " }.replacingOccurrences(of: "[_file]", with: "")
                listed[part]?[current, default: []].append(option)
            } else if line.hasPrefix("  "), let dash = line.range(of: " — ") {
                current = line[..<dash.lowerBound].trimmingCharacters(in: .whitespaces)
                listed[part]?[current] = []
            }
        }
        let readme = try Self.readme()
        for (part, heading) in [("Decorators", "### Decorator options"), ("Origins", "### Origins")] {
            let rows = try Self.tableRows(readme, section: heading)
            let program = try #require(listed[part])
            #expect(Set(rows.map(\.name)) == Set(program.keys), "\(heading): README \(rows.map(\.name)), veneer decorators \(program.keys.sorted())")
            for (name, row) in rows {
                for option in program[name] ?? [] {
                    #expect(row.contains("`\(option)`") || row.contains("`\(option):"), "\(heading): \(name)'s option \(option) is not in its row")
                }
            }
        }
    }

    @Test("each bad.yaml example, run through veneer check, prints exactly the lines the README shows")
    func checkExamples() async throws {
        let readme = try Self.readme()
        let marker = "<!-- bad.yaml: checked by Tests/EndToEndTests/ReadmeTests.swift -->\n"
        var rest = readme[...]
        var examples = 0
        while let found = rest.range(of: marker) {
            let (file, afterFile) = try Self.fencedBlock("yaml", in: rest[found.upperBound...])
            let (console, afterConsole) = try Self.fencedBlock("console", in: afterFile)
            rest = afterConsole
            examples += 1
            var lines = console.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            if lines.last == "" { lines.removeLast() }
            #expect(lines.first == "$ veneer check --config bad.yaml")
            let expected = Array(lines.dropFirst())

            let directory = try temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            try file.write(toFile: directory + "/bad.yaml", atomically: true, encoding: .utf8)
            let result = try await VeneerProcess.run(["check", "--config", "bad.yaml"], directory: directory)
            #expect(result.status == 78)
            var printed = (result.stdout + result.stderr).split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
            printed = printed.filter { !$0.isEmpty }
            #expect(printed == expected, "README example \(examples): veneer check printed\n\(printed.joined(separator: "\n"))")
        }
        #expect(examples == 2)
    }

    @Test("the code layout names every module folder, and every decorator's and origin's folder")
    func codeLayout() throws {
        let readme = try Self.readme()
        let start = try #require(readme.range(of: "## Code layout"))
        let layout = readme[start.upperBound...]
        let files = FileManager.default
        for module in try files.contentsOfDirectory(atPath: packageRoot + "/Sources") {
            #expect(layout.contains("\(module)/"), "Sources/\(module) is not in the code layout")
        }
        for parent in ["VeneerDecorators", "VeneerOrigins"] {
            for folder in try files.contentsOfDirectory(atPath: packageRoot + "/Sources/" + parent) {
                #expect(layout.contains("\(folder)/"), "Sources/\(parent)/\(folder) is not in the code layout")
            }
        }
        for file in try files.contentsOfDirectory(atPath: packageRoot + "/packaging/debian") where file.hasSuffix(".in") {
            #expect(layout.contains(file), "packaging/debian/\(file) is not in the code layout")
        }
    }
}
