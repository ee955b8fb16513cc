import Foundation
import HTTPTypes
import VeneerConfig
import VeneerCore
import VeneerServer

/// What the status page shows, read once per page or `GET /-/status`: the environment, the
/// chain with each entry's live figures, the tables its handlers list (``StatusListing``:
/// block_list's learned blocks) and the last requests.
struct StatusSnapshot {
    /// One box of the chain.
    struct Box {
        let name: String
        /// `decorator` or `origin`.
        let role: String
        let figures: [StatusFigure]
    }

    let environment: String
    /// The environments of the file, for the switcher (the serving one among them).
    let environments: [String]
    /// Why the switcher is off, if it is (under systemd the instance name is the environment).
    let switchRefusal: String?
    let generation: Int
    let version: String
    let uptimeSeconds: Int
    let config: String
    let healthProblems: [String]
    let chain: [Box]
    /// The tables of the chain's handlers, one per name, in chain order.
    let tables: [StatusTable]
    /// Oldest first.
    let requests: [RequestFeed.Item]
    /// The environment's last 15 minutes, for the charts.
    var charts: TrafficHistory.Series?

    /// Reads the figures and tables of every entry of `generation` (awaiting those that keep
    /// them in an actor, such as auth_refresh's token manager).
    static func read(_ generation: ChainGeneration, environments: [String], switchRefusal: String?, health: HealthBoard,
                     feed: RequestFeed?, uptimeSeconds: Int) async -> StatusSnapshot {
        var boxes: [Box] = []
        var tables: [StatusTable] = []
        for (index, entry) in generation.entries.enumerated() {
            let figures = await (entry.handler as? any StatusReporting)?.statusFigures() ?? []
            boxes.append(Box(name: entry.name, role: index == generation.entries.count - 1 ? "origin" : "decorator", figures: figures))
            for table in await (entry.handler as? any StatusListing)?.statusTables() ?? [] {
                if let same = tables.firstIndex(where: { $0.name == table.name }) {
                    tables[same].rows += table.rows
                } else {
                    tables.append(table)
                }
            }
        }
        return StatusSnapshot(
            environment: generation.spec.name, environments: environments, switchRefusal: switchRefusal, generation: generation.number,
            version: VeneerVersion.text, uptimeSeconds: uptimeSeconds, config: generation.spec.configFile, healthProblems: health.problems,
            chain: boxes, tables: tables, requests: feed?.recent() ?? [], charts: feed?.history.series(generation.spec.name))
    }

    /// `GET /-/status`: the same as the page, for programs (and the page's own script).
    var json: JSONValue {
        var members: [(String, JSONValue)] = [
            ("environment", .string(environment)), ("environments", .array(environments.map(JSONValue.string))),
            ("chain_generation", .int(generation)), ("version", .string(version)), ("uptime_seconds", .int(uptimeSeconds)),
            ("status", .string(healthProblems.isEmpty ? "ok" : "degraded")),
            ("chain", .array(chain.map { box in
                .object([("name", .string(box.name)), ("role", .string(box.role)),
                         ("figures", .object(box.figures.map { ($0.name, $0.value) }))])
            })),
        ]
        if let switchRefusal { members.append(("switch_refused", .string(switchRefusal))) }
        if !healthProblems.isEmpty { members.append(("problems", .array(healthProblems.map(JSONValue.string)))) }
        for table in tables { members.append((table.name, .array(table.rows))) }
        members.append(("requests", .array(requests.map(\.json))))
        if let charts { members.append(("charts", StatusCharts.json(charts))) }
        return .object(members)
    }
}
