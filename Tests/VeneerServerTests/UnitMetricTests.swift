import CoreMetrics
import Testing
@testable import VeneerServer

/// `veneer_http_requests_by_unit_total{unit}` stays bounded (issue 29).
@Suite("Requests by caller unit")
struct UnitMetricTests {
    @Test("32 units get a label of their own, the rest share other; a caller without a unit is none")
    func bounded() {
        let metrics = EdgeMetrics(factory: NOOPMetricsHandler.instance)
        let first = metrics.unitCounter("unit-0.service")
        #expect(metrics.unitCounter("unit-0.service") === first, "one counter per unit")
        for index in 1..<(EdgeMetrics.maxUnits + 10) { _ = metrics.unitCounter("unit-\(index).service") }
        #expect(metrics.unitCounter("unit-40.service").dimensions.first?.1 == "other")
        #expect(metrics.unitCounter(nil).dimensions.first?.1 == "none", "a caller without a unit is never other")
        #expect(metrics.unitCounter("unit-3.service").dimensions.first?.1 == "unit-3.service")
        #expect(metrics.unitCounter("yet-another.scope") === metrics.unitCounter("unit-41.service"))
    }
}
