import Foundation
import ServiceLifecycle
import Synchronization
import Testing
import VeneerConfig
import VeneerCore
import VeneerRuntime
import VeneerTestSupport

@Suite("Graceful shutdown drains the chain", .timeLimit(.minutes(1)))
struct ShutdownDrainTests {
    @Test("a request whose client left is finished before what the chain uses is closed")
    func drainsBeforeClosing() async throws {
        let events = Mutex<[String]>([])
        let entered = Signals<Void>()
        let gate = Latch()
        var registry = extendedRegistry
        registry.register(DecoratorFactory(name: "hold", summary: "holds requests at a gate", options: [], decode: { _, _ in true },
                                           make: { _, inner, context in
                                               _ = context.carried.value(for: context.entryKey()) {
                                                   ClosingProbe { events.withLock { $0.append("closed") } }
                                               }
                                               return RecordingHandler { request in
                                                   entered.send(())
                                                   await gate.wait()
                                                   events.withLock { $0.append("request leaves") }
                                                   return try await inner.handle(request)
                                               }
                                           }))
        let state = try temporaryDirectory("veneer-state")  // not the .veneer of the checkout, shared by the run
        defer { try? FileManager.default.removeItem(atPath: state) }
        var configuration = InstanceConfiguration(
            readSource: { () throws(ConfigError) -> ConfigSource in
                ConfigSource(file: "test.yaml", text: "environments: {development: {origin: {mock: {}}, chain: [hold]}}")
            },
            environment: "development", variables: ["STATE_DIRECTORY": state], registry: registry, logger: quietLogger())
        configuration.listenOverride = ListenAddress(host: "127.0.0.1", port: 0)
        let ready = Signals<ReadyInfo>()
        let instance = try await VeneerInstance(configuration: configuration, onReady: { ready.send($0) })
        let group = ServiceGroup(configuration: .init(services: [instance], logger: quietLogger()))
        let running = Task { try await group.run() }
        guard let port = await ready.next()?.port else { throw CancellationError() }

        let connection = try await RawConnection.connect(port: port)
        try await connection.send("GET /posts HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
        _ = await entered.next()
        // Gone, not half-closed: the listener has no connection left to wait for.
        try await connection.reset()
        await group.triggerGracefulShutdown()
        // Something that must not happen cannot be waited for: give the shutdown a moment in
        // which, without the drain, the chain's objects would already be closed.
        try await Task.sleep(for: .milliseconds(300))
        gate.open()
        try await running.value
        #expect(events.withLock { $0 } == ["request leaves", "closed"])
    }
}
