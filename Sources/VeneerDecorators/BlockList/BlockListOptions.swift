import Foundation
import VeneerConfig
import VeneerCore

/// Options of `block_list`, decoded once (the rules file included).
public struct BlockListOptions: Sendable, Hashable {
    /// Requests matching any of these are refused.
    public var deny = RuleSet()
    /// When not empty, every kind listed must match.
    public var allow = RuleSet()
    /// The rules file, if any (re-read at every reload).
    public var rulesFile: String?
    /// The upstream's blocked-account signal, if blocks are learned.
    public var learn: LearnSignal?
    /// The store for learned blocks; nil: memory.
    public var store: String?

    /// The account learned blocks are about when no `account_header` is set: the one
    /// Veneer's own credentials act for.
    public static let credentialsAccount = "veneer"

    /// No rules.
    public init() {}

    static let docs: [OptionDoc] = [
        OptionDoc("deny", "rules", "clients (IPs, CIDRs), uids, groups, units (callers on a Unix socket or with peer_identity), "
                  + "headers (name: [values]), methods, routes (/posts, /posts/{id}, /posts/13) to refuse"),
        OptionDoc("allow", "rules", "when given, each kind listed must match (uids, groups and units are one kind: any of them); "
                  + "an empty allow list allows all"),
        OptionDoc("rules_file", "file", "more rules, one per line: 'deny client 10.0.0.0/8', 'allow method GET', 'allow uid 1001', "
                  + "'deny unit cron*.service', ... (re-read on reload)"),
        OptionDoc("learn", "signal", "status, json (field: value), header (name: value), account_header, block_for: the upstream's 'account blocked' answer"),
        OptionDoc("store", "store name", default: "memory", "where learned blocks are kept (a sqlite store survives restarts)"),
    ]

    static func decode(_ mapping: ConfigMapping, site: ChainSite) -> BlockListOptions? {
        var options = BlockListOptions()
        if let deny = mapping["deny"] { options.deny = decodeRules(deny) }
        if let allow = mapping["allow"] { options.allow = decodeRules(allow) }
        let store = mapping.storeReference()
        if store == nil && !mapping.contains("store") { mapping.note("store", .string("memory")) }
        options.store = store == "memory" ? nil : store
        if let value = mapping["rules_file"], let path = value.filePath() {
            options.rulesFile = path
            mapping.note("rules_file", .string(path))
            do {
                let (deny, allow) = try RulesFile.parse(path)
                options.deny.merge(deny)
                options.allow.merge(allow)
            } catch {
                // Problems inside the file are at its own lines; one with the file as a whole
                // (missing, unreadable) is at the key that names it.
                for diagnostic in error.diagnostics {
                    if diagnostic.mark == nil { value.error(diagnostic.message) } else { value.context.sink.append(contentsOf: [diagnostic]) }
                }
            }
        }
        if let learn = mapping.mapping("learn", allowedKeys: ["status", "json", "header", "account_header", "block_for"]) {
            let status = learn.int("status", in: 100...599)
            if status == nil && learn["status"] == nil { learn.error("status", "required: the status of the upstream's blocked answer") }
            var signal = LearnSignal(status: status ?? 403)
            if let json = learn.mapping("json", allowedKeys: nil) {
                for entry in json.entries { if let value = entry.value.scalarText() { signal.json[entry.key] = value } }
                learn.note("json", .object(signal.json.sorted { $0.key < $1.key }.map { ($0.key, JSONValue.string($0.value)) }))
            }
            if let headers = learn.mapping("header", allowedKeys: nil) {
                for entry in headers.entries { if let value = entry.value.scalarText() { signal.headers[entry.key.lowercased()] = value } }
                learn.note("header", .object(signal.headers.sorted { $0.key < $1.key }.map { ($0.key, JSONValue.string($0.value)) }))
            }
            signal.accountHeader = learn.string("account_header")?.lowercased()
            if signal.accountHeader == nil { learn.note("account_header", .string("(Veneer's own credentials: account '\(credentialsAccount)')")) }
            signal.blockFor = learn.duration("block_for", in: .init(.zero ... .days(365)))
            if signal.blockFor == nil { learn.note("block_for", .string("until unblocked")) }
            options.learn = signal
            mapping.note("learn", .object(learn.summary))
        }
        mapping.note("deny", summary(options.deny))
        mapping.note("allow", summary(options.allow))
        return options
    }

    static func decodeRules(_ value: ConfigValue) -> RuleSet {
        var rules = RuleSet()
        guard let mapping = value.mapping(allowedKeys: ["clients", "uids", "groups", "units", "headers", "methods", "routes"]) else { return rules }
        for item in mapping["uids"]?.list() ?? [] {
            guard let text = item.string() else { continue }
            if let uid = ConfigDocument.userID(text) { rules.uids.insert(uid) } else { item.error("there is no user \"\(text)\" on this machine (use a name or a number)") }
        }
        for item in mapping["groups"]?.list() ?? [] {
            guard let text = item.string() else { continue }
            if let gid = ConfigDocument.groupID(text) { rules.groups.insert(gid) } else { item.error("there is no group \"\(text)\" on this machine") }
        }
        for item in mapping["units"]?.list() ?? [] {
            guard let text = item.string() else { continue }
            if let problem = unitProblem(text) { item.error(problem) } else { rules.units.append(UnitPattern(text)) }
        }
        for item in mapping["clients"]?.list() ?? [] {
            guard let text = item.string() else { continue }
            if let cidr = CIDR(text) { rules.clients.append(cidr) } else { item.error("\"\(text)\" is not an IP address or CIDR (e.g. 10.0.0.0/8, 2001:db8::/32)") }
        }
        if let headers = mapping.mapping("headers", allowedKeys: nil) {
            for entry in headers.entries {
                guard let values = entry.value.stringList() else { continue }
                rules.headers[entry.key.lowercased(), default: []].formUnion(values)
            }
        }
        for item in mapping["methods"]?.list() ?? [] {
            guard let text = item.string() else { continue }
            let method = text.uppercased()
            if ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"].contains(method) { rules.methods.insert(method) } else {
                item.error("\"\(text)\" is not a method of the posts API (GET, HEAD, POST, PUT, PATCH, DELETE)")
            }
        }
        for item in mapping["routes"]?.list() ?? [] {
            guard let text = item.string() else { continue }
            if let route = RoutePattern(text) { rules.routes.append(route) } else { item.error("\"\(text)\" is not a route (/posts, /posts/{id} or /posts/13)") }
        }
        return rules
    }

    /// Why `text` is not a unit name pattern: units are named with letters, digits and
    /// `:-_.\@`, plus the glob's `*?[]`.
    static func unitProblem(_ text: String) -> String? {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:-_.\\@*?[]!")
        guard !text.isEmpty, text.allSatisfy({ allowed.contains($0) }) else {
            return "\"\(text)\" is not a systemd unit name or glob (e.g. cron.service, backup-*.service)"
        }
        return nil
    }

    static func summary(_ rules: RuleSet) -> JSONValue {
        var members: [(String, JSONValue)] = []
        if !rules.clients.isEmpty { members.append(("clients", .array(rules.clients.map { .string($0.description) }))) }
        if !rules.headers.isEmpty {
            // Shown by `veneer chain` and /-/chain: a rule on a credential header names credentials.
            members.append(("headers", .object(rules.headers.sorted { $0.key < $1.key }.map { name, values in
                (name, .array(values.sorted().map { .string(RequestRedaction.written.header(name, $0)) }))
            })))
        }
        if !rules.uids.isEmpty { members.append(("uids", .array(rules.uids.sorted().map { .int(Int($0)) }))) }
        if !rules.groups.isEmpty { members.append(("groups", .array(rules.groups.sorted().map { .int(Int($0)) }))) }
        if !rules.units.isEmpty { members.append(("units", .array(rules.units.map { .string($0.description) }))) }
        if !rules.methods.isEmpty { members.append(("methods", .array(rules.methods.sorted().map(JSONValue.string)))) }
        if !rules.routes.isEmpty { members.append(("routes", .array(rules.routes.map { .string($0.description) }))) }
        return .object(members)
    }
}

/// The rules file: one rule per line, `deny|allow client|header|method|route ARGS`, with
/// `#` comments. Problems are reported with the file's own line and column.
enum RulesFile {
    static func parse(_ path: String) throws(ConfigError) -> (deny: RuleSet, allow: RuleSet) {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            let reason = FileManager.default.fileExists(atPath: path) ? "is not readable UTF-8 text" : "does not exist"
            throw ConfigError([ConfigDiagnostic(mark: nil, path: "", message: "rules file \(path) \(reason)")])
        }
        return try parse(text, file: path)
    }

    static func parse(_ text: String, file: String) throws(ConfigError) -> (deny: RuleSet, allow: RuleSet) {
        var deny = RuleSet(), allow = RuleSet()
        var problems: [ConfigDiagnostic] = []
        for (number, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            var words: [(text: String, column: Int)] = []
            var column = 1
            var current = ""
            var start = 1
            for character in line + " " {
                if character == " " || character == "\t" || character == "\r" {
                    if !current.isEmpty { words.append((current, start)) }
                    current = ""
                } else {
                    if current.isEmpty { start = column }
                    current.append(character)
                }
                column += 1
            }
            guard !words.isEmpty else { continue }
            func fail(_ word: Int, _ message: String) {
                let column = word < words.count ? words[word].column : (words.last.map { $0.column + $0.text.count } ?? 1)
                problems.append(ConfigDiagnostic(mark: SourceMark(file: file, line: number + 1, column: column), path: "", message: message))
            }
            guard ["deny", "allow"].contains(words[0].text) else {
                fail(0, "a rule starts with 'deny' or 'allow'\(Suggestions.hint(for: words[0].text, in: ["deny", "allow"]))")
                continue
            }
            guard words.count >= 3 else {
                fail(words.count, "expected '\(words[0].text) client|uid|group|unit|header|method|route VALUE'")
                continue
            }
            var rules = RuleSet()
            let kind = words[1].text
            switch kind {
            case "client":
                guard words.count == 3, let cidr = CIDR(words[2].text) else { fail(2, "\"\(words[2].text)\" is not an IP address or CIDR"); continue }
                rules.clients = [cidr]
            case "header":
                guard words.count == 4 else { fail(min(words.count, 4), "expected 'header NAME VALUE'"); continue }
                rules.headers = [words[2].text.lowercased(): [words[3].text]]
            case "method":
                let method = words[2].text.uppercased()
                guard words.count == 3, ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"].contains(method) else {
                    fail(2, "\"\(words[2].text)\" is not a method of the posts API"); continue
                }
                rules.methods = [method]
            case "uid":
                guard words.count == 3, let uid = ConfigDocument.userID(words[2].text) else { fail(2, "\"\(words[2].text)\" is not a user (a name or a number)"); continue }
                rules.uids = [uid]
            case "group":
                guard words.count == 3, let gid = ConfigDocument.groupID(words[2].text) else { fail(2, "there is no group \"\(words[2].text)\" on this machine"); continue }
                rules.groups = [gid]
            case "unit":
                if words.count == 3, let problem = BlockListOptions.unitProblem(words[2].text) { fail(2, problem); continue }
                guard words.count == 3 else { fail(3, "expected 'unit PATTERN'"); continue }
                rules.units = [UnitPattern(words[2].text)]
            case "route":
                guard words.count == 3, let route = RoutePattern(words[2].text) else { fail(2, "\"\(words[2].text)\" is not a route (/posts, /posts/{id} or /posts/13)"); continue }
                rules.routes = [route]
            default:
                fail(1, "unknown rule kind '\(kind)'\(Suggestions.hint(for: kind, in: ["client", "uid", "group", "unit", "header", "method", "route"]))")
                continue
            }
            if words[0].text == "deny" { deny.merge(rules) } else { allow.merge(rules) }
        }
        if !problems.isEmpty { throw ConfigError(problems) }
        return (deny, allow)
    }
}
