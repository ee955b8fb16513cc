@testable import VeneerServer
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("The descriptor limit: the soft limit goes up to the hard one at start, never past it")
struct DescriptorLimitTests {
    @Test("a soft limit under the hard one becomes the hard one; one equal to it stays")
    func target() {
        #expect(DescriptorLimit.target(soft: 1024, hard: 524_288) == 524_288)
        #expect(DescriptorLimit.target(soft: 65_536, hard: 65_536) == nil)
        #expect(DescriptorLimit.target(soft: .max, hard: .max) == nil, "RLIM_INFINITY")
    }

    @Test("raising leaves this process with its soft limit at its hard limit")
    func raises() throws {
        let change = try #require(DescriptorLimit.raiseToHard())
        #expect(change.after == change.hard)
        var limits = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limits)
        #expect(UInt64(limits.rlim_cur) == UInt64(limits.rlim_max))
    }
}
