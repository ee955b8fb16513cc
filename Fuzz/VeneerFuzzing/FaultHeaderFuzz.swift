import VeneerCore
import VeneerDecorators

/// The `Veneer-Fault` request header, which any loopback client may send where `fault`
/// allows it, on any text.
///
/// Checks: no crash (an overflowing delay once ended the daemon); a plan it reads has a delay
/// within ``FaultPlan/delayBounds`` and a status within 400...599; written back as a header
/// (`delay=...`, `status=...`, `drop`), the plan reads as the same plan.
public enum FaultHeaderFuzz {
    /// The target's body.
    public static func run(_ bytes: UnsafeRawBufferPointer) throws(FuzzFinding) {
        let header = String(decoding: bytes, as: UTF8.self)
        let plan: FaultPlan
        do {
            plan = try FaultPlan(header: header)
        } catch {
            return
        }
        var parts: [String] = []
        if let delay = plan.delay {
            guard FaultPlan.delayBounds.range.contains(delay) else { throw FuzzFinding("delay \(delay) is out of bounds for '\(header)'") }
            parts.append("delay=\(Units.format(delay))")
        }
        switch plan.abort {
        case .status(let code)?:
            guard (400...599).contains(code) else { throw FuzzFinding("status \(code) is out of bounds for '\(header)'") }
            parts.append("status=\(code)")
        case .drop?: parts.append("drop")
        case nil: break
        }
        let again: FaultPlan
        do {
            again = try FaultPlan(header: parts.joined(separator: ", "))
        } catch {
            throw FuzzFinding("'\(header)' read as \(parts), which does not read back: \(error)")
        }
        guard again == plan else { throw FuzzFinding("'\(header)' read as \(parts), which reads back differently") }
    }
}
