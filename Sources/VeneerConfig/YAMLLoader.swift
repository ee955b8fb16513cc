import CLibYAML
import Foundation

/// Reads YAML text with the system libyaml into ``ConfigNode`` trees.
public enum YAMLLoader {
    /// At most this many nodes after alias expansion: an "alias bomb" stops here.
    static let maxNodes = 200_000
    /// At most this deep.
    static let maxDepth = 64

    /// Loads the first document of `text`; nil for an empty document. `file` is used in marks.
    public static func load(_ text: String, file: String) throws(ConfigError) -> ConfigNode? {
        let bytes = Array(text.utf8)
        // libyaml keeps pointers into the parser and the input for the whole load: both are
        // heap-allocated here and freed only at the end (TOOLCHAIN.md).
        let input = UnsafeMutablePointer<UInt8>.allocate(capacity: max(bytes.count, 1))
        input.initialize(from: bytes, count: bytes.count)
        let parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
        let document = UnsafeMutablePointer<yaml_document_t>.allocate(capacity: 1)
        defer {
            input.deallocate()
            parser.deallocate()
            document.deallocate()
        }
        guard yaml_parser_initialize(parser) == 1 else {
            throw ConfigError([ConfigDiagnostic(mark: nil, path: "", message: "\(file): libyaml could not start (out of memory)")])
        }
        defer { yaml_parser_delete(parser) }
        yaml_parser_set_input_string(parser, input, bytes.count)
        yaml_parser_set_encoding(parser, YAML_UTF8_ENCODING)

        guard yaml_parser_load(parser, document) == 1 else {
            throw ConfigError([syntaxError(parser, file: file, input: bytes)])
        }
        defer { yaml_document_delete(document) }
        guard let root = yaml_document_get_root_node(document) else { return nil }

        // A second document is a mistake in a configuration file: say so.
        let second = UnsafeMutablePointer<yaml_document_t>.allocate(capacity: 1)
        defer { second.deallocate() }
        if yaml_parser_load(parser, second) == 1 {
            let hasRoot = yaml_document_get_root_node(second) != nil
            let mark = second.pointee.start_mark
            yaml_document_delete(second)
            if hasRoot {
                throw ConfigError([ConfigDiagnostic(
                    mark: SourceMark(file: file, line: Int(mark.line) + 1, column: Int(mark.column) + 1), path: "",
                    message: "a configuration file holds one YAML document; remove the second one (after '---')")])
            }
        } else {
            throw ConfigError([syntaxError(parser, file: file, input: bytes)])
        }

        var converter = Converter(document: document, file: file)
        let node = converter.convert(root, depth: 0, path: "")
        if !converter.errors.isEmpty { throw ConfigError(converter.errors) }
        return node
    }

    static func syntaxError(_ parser: UnsafeMutablePointer<yaml_parser_t>, file: String, input: [UInt8]) -> ConfigDiagnostic {
        let problem = parser.pointee.problem.map { String(cString: $0) } ?? "invalid YAML"
        let context = parser.pointee.context.map { String(cString: $0) }
        let problemMark = parser.pointee.problem_mark
        let contextMark = parser.pointee.context_mark
        let (message, atContext) = SyntaxHint.reword(
            problem: problem, context: context, character: Int(problemMark.index) < input.count ? input[Int(problemMark.index)] : nil,
            opening: Int(contextMark.index) < input.count ? input[Int(contextMark.index)] : nil,
            contextLine: Int(contextMark.line) + 1, contextColumn: Int(contextMark.column) + 1)
        let mark = atContext ? contextMark : problemMark
        return ConfigDiagnostic(mark: SourceMark(file: file, line: Int(mark.line) + 1, column: Int(mark.column) + 1),
                                path: "", message: "YAML syntax error: " + message)
    }

    struct Converter {
        let document: UnsafeMutablePointer<yaml_document_t>
        let file: String
        var errors: [ConfigDiagnostic] = []
        var nodeCount = 0
        /// A limit was passed: nothing more is read, and the document is refused with that one
        /// error (each node past the depth limit once made an error of its own, with a path as
        /// long as its depth: a recursive alias with long keys took gigabytes).
        var stopped = false

        init(document: UnsafeMutablePointer<yaml_document_t>, file: String) {
            self.document = document
            self.file = file
        }

        func mark(_ node: UnsafeMutablePointer<yaml_node_t>) -> SourceMark {
            SourceMark(file: file, line: Int(node.pointee.start_mark.line) + 1, column: Int(node.pointee.start_mark.column) + 1)
        }

        mutating func fail(_ mark: SourceMark, _ message: String, path: String = "") -> ConfigNode {
            errors.append(ConfigDiagnostic(mark: mark, path: path, message: message))
            return .scalar(.init(value: "", quoted: false, mark: mark))
        }

        mutating func convert(_ node: UnsafeMutablePointer<yaml_node_t>, depth: Int, path: String) -> ConfigNode {
            let here = mark(node)
            if stopped { return .scalar(.init(value: "", quoted: false, mark: here)) }
            nodeCount += 1
            if nodeCount > YAMLLoader.maxNodes {
                stopped = true
                return fail(here, "the document expands to more than \(YAMLLoader.maxNodes) nodes (too many aliases?)", path: path)
            }
            if depth > YAMLLoader.maxDepth {
                stopped = true
                return fail(here, "nesting deeper than \(YAMLLoader.maxDepth) levels (a recursive alias?)", path: path)
            }
            switch node.pointee.type {
            case YAML_SCALAR_NODE:
                let scalar = node.pointee.data.scalar
                let text = String(decoding: UnsafeBufferPointer(start: scalar.value, count: Int(scalar.length)), as: UTF8.self)
                // libyaml's loader gives every untagged scalar the str tag, so only the
                // style tells a quoted "null" from a plain null.
                let quoted = scalar.style != YAML_PLAIN_SCALAR_STYLE
                return .scalar(.init(value: text, quoted: quoted, mark: here))
            case YAML_SEQUENCE_NODE:
                var items: [ConfigNode] = []
                var item = node.pointee.data.sequence.items.start
                // Past a limit nothing more is read: the document is refused with that one
                // error, not with one for every node that follows.
                while item != node.pointee.data.sequence.items.top, !stopped {
                    if let child = yaml_document_get_node(document, item!.pointee) {
                        items.append(convert(child, depth: depth + 1, path: "\(path)[\(items.count)]"))
                    }
                    item = item! + 1
                }
                return .sequence(.init(items: items, mark: here))
            case YAML_MAPPING_NODE:
                return convertMapping(node, depth: depth, mark: here, path: path)
            default:
                return fail(here, "empty node", path: path)
            }
        }

        mutating func convertMapping(_ node: UnsafeMutablePointer<yaml_node_t>, depth: Int, mark here: SourceMark, path: String) -> ConfigNode {
            var entries: [ConfigNode.Mapping.Entry] = []
            var merged: [ConfigNode.Mapping.Entry] = []
            var pair = node.pointee.data.mapping.pairs.start
            // Past a limit nothing more is read (the keys of the rest would read as empty, each
            // a "duplicate key ''"): the document is refused with that one error.
            while pair != node.pointee.data.mapping.pairs.top, !stopped {
                defer { pair = pair! + 1 }
                guard let keyNode = yaml_document_get_node(document, pair!.pointee.key),
                      let valueNode = yaml_document_get_node(document, pair!.pointee.value) else { continue }
                let key = convert(keyNode, depth: depth + 1, path: path)
                guard case .scalar(let keyScalar) = key else {
                    _ = fail(key.mark, "mapping keys must be plain text, not \(key.kindDescription)", path: path)
                    continue
                }
                let childPath = path.isEmpty ? keyScalar.value : "\(path).\(keyScalar.value)"
                let value = convert(valueNode, depth: depth + 1, path: childPath)
                if stopped { break }
                if keyScalar.value == "<<" && !keyScalar.quoted {
                    // YAML merge key: the entries of the merged mapping(s) count as written
                    // here, unless this mapping sets the key itself.
                    let sources: [ConfigNode]
                    switch value {
                    case .mapping: sources = [value]
                    case .sequence(let sequence): sources = sequence.items
                    default:
                        _ = fail(value.mark, "a merge key '<<' needs a mapping or a list of mappings, not \(value.kindDescription)", path: path)
                        continue
                    }
                    for source in sources {
                        guard case .mapping(let mapping) = source else {
                            _ = fail(source.mark, "a merge key '<<' needs mappings, not \(source.kindDescription)", path: path)
                            continue
                        }
                        for entry in mapping.entries where !merged.contains(where: { $0.key.value == entry.key.value }) {
                            merged.append(entry)
                        }
                    }
                    continue
                }
                if let previous = entries.first(where: { $0.key.value == keyScalar.value }) {
                    _ = fail(keyScalar.mark, "duplicate key '\(keyScalar.value)' (first at line \(previous.key.mark.line)): keep one of them",
                             path: childPath)
                    continue
                }
                entries.append(.init(key: keyScalar, value: value))
            }
            for entry in merged where !entries.contains(where: { $0.key.value == entry.key.value }) {
                entries.append(entry)
            }
            return .mapping(.init(entries: entries, mark: here))
        }
    }
}
