import VeneerFuzzing

// libFuzzer's entry; its main() runs the fuzzing loop (make fuzz, README "Fuzzing").
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> Int32 {
    FuzzTarget.faultHeader.fuzz(start, count)
}
