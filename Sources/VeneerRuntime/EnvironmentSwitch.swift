import Foundation
import Logging
import NIOCore
import Prometheus
import Synchronization
import VeneerConfig
import VeneerCore
import VeneerServer

/// What ``VeneerInstance/switchEnvironment(to:)`` did.
public enum EnvironmentSwitchOutcome: Sendable {
    /// The environment switched to serves now, as this generation; `previous` served before.
    /// `warnings`: what a switch does not apply (the new environment's listen addresses).
    case switched(ChainGeneration, previous: String, warnings: [String])
    /// The environment asked for already serves: nothing was rebuilt.
    case unchanged(ChainGeneration)
    /// The environment does not validate (or its chain cannot be built): every problem;
    /// the environment serving keeps serving.
    case failed(ConfigError)
    /// The file has no such environment; these are the ones it has.
    case unknown(environments: [String])
    /// This instance does not switch (it runs under systemd); the message says what to do.
    case refused(String)
}

/// The pure parts of a switch: who may switch, and what a request to switch asks for.
enum EnvironmentSwitch {
    /// Whether systemd started this process as a service: it sets `INVOCATION_ID` for every
    /// unit it runs. `NOTIFY_SOCKET` alone does not say so (other supervisors, and tests,
    /// speak the notify protocol). A shell a service started (a desktop's terminal) inherits
    /// `INVOCATION_ID` too, but systemd 248+ names the process it started in
    /// `SYSTEMD_EXEC_PID`, which is then another process.
    static func isSystemdService(variables: [String: String], processID: Int32) -> Bool {
        guard let invocation = variables["INVOCATION_ID"], !invocation.isEmpty else { return false }
        guard let started = variables["SYSTEMD_EXEC_PID"] else { return true }
        return started == String(processID)
    }

    /// Why an instance under systemd does not switch: its unit's instance name is the
    /// environment (`veneer@production`), which a switch would make a lie.
    static func systemdRefusal(target: String?) -> String {
        "the instance name is the environment under systemd: systemctl start veneer@\(target ?? "ENV")"
    }

    /// The environment a `POST /-/environment` asks for: `{"environment":"staging"}`, or
    /// `environment=staging` as an HTML form posts it (`application/x-www-form-urlencoded`).
    struct Request: Equatable {
        /// The environment to switch to.
        let environment: String
        /// Whether it came as a form (a browser then gets 303 See Other back to `/-/`).
        let isForm: Bool
    }

    /// The request in `body`, or nil when it names no environment.
    ///
    /// A form body without an `environment` field is read as JSON too: `curl -d
    /// '{"environment":"x"}'` sends JSON under curl's default type, the form one. That opens
    /// nothing to a web page: a page can post JSON as `text/plain` (read as JSON already),
    /// and the edge takes changes to the admin API only from programs (no `Origin`) or from
    /// the status page itself, whatever the body.
    static func request(body: ByteBuffer, contentType: String?) -> Request? {
        let mediaType = contentType?.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        if mediaType == "application/x-www-form-urlencoded" {
            let text = String(buffer: body)
            for pair in text.split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard parts.count == 2, formDecoded(parts[0]) == "environment" else { continue }
                guard let value = formDecoded(parts[1]), !value.isEmpty else { return nil }
                return Request(environment: value, isForm: true)
            }
        }
        guard let value = try? JSONValue.parse(body), let name = value["environment"]?.stringValue, !name.isEmpty else { return nil }
        return Request(environment: name, isForm: false)
    }

    /// A form field's text: `+` is a space, then percent-decoding (nil when malformed).
    static func formDecoded(_ field: Substring) -> String? {
        field.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}

extension VeneerInstance {
    /// The environment serving new requests: the one started with until a switch.
    public var servingEnvironment: String {
        chains.serving?.spec.name ?? configuration.environment
    }

    /// The environment names of the configuration file as last read (at start, reload or
    /// switch), in file order: what a switch may go to.
    public var environments: [String] { environmentNames.withLock { $0 } }

    /// Why this instance refuses to switch environments (it runs under systemd), or nil.
    public var switchRefusal: String? {
        EnvironmentSwitch.isSystemdService(variables: configuration.variables, processID: ProcessInfo.processInfo.processIdentifier)
            ? EnvironmentSwitch.systemdRefusal(target: nil) : nil
    }

    /// Serves environment `target` of the same file from now on, without a restart: a reload
    /// with another environment's name, in turn with the reloads. The listeners stay where
    /// they are; requests in flight finish on the old chain; state carries over where an
    /// entry's decorator and options are the same. A target that does not validate changes
    /// nothing. Switching to the environment serving rebuilds nothing.
    public func switchEnvironment(to target: String) async -> EnvironmentSwitchOutcome {
        if switchRefusal != nil { return .refused(EnvironmentSwitch.systemdRefusal(target: target)) }
        return await reloads.run { () async -> EnvironmentSwitchOutcome in
            let names: [String]
            do throws(ConfigError) {
                names = try ConfigDocument(source: try self.configuration.readSource()).environmentNames
            } catch {
                return .failed(error)
            }
            self.environmentNames.withLock { $0 = names }
            guard names.contains(target) else { return .unknown(environments: names) }
            if let current = self.chains.serving, current.spec.name == target { return .unchanged(current) }
            let previous = self.servingEnvironment
            switch await self.loadNow(switchingTo: target) {
            case .success(let loaded): return .switched(loaded.generation, previous: previous, warnings: loaded.warnings)
            case .failure(let error): return .failed(error)
            }
        }
    }

    /// After a switch: the admin address file and `veneer_environment_info` follow the
    /// environment serving (so `veneer reload -e NEW` finds this instance, and `-e OLD` no
    /// longer does).
    func switched(from old: EnvironmentSpec, to new: EnvironmentSpec) {
        do {
            try adminAddress.move(stateDirectory: new.stateDirectory, environment: new.name)
        } catch {
            logger.warning("could not record the admin address for environment \(new.name)", metadata: ["error": .string(ErrorText.describe(error))])
        }
        noteServing(new.name)
    }

    /// Sets `veneer_environment_info{environment="NAME"} 1`, the only series of it.
    func noteServing(_ environment: String) {
        feed.history.serving(environment)
        environmentInfo.withLock { gauge in
            if let gauge { metrics.unregisterGauge(gauge) }
            let serving = metrics.makeGauge(descriptor: DescribedMetricsFactory.descriptor("veneer_environment_info"),
                                            labels: [("environment", environment)])
            serving.set(to: 1)
            gauge = serving
        }
    }
}
