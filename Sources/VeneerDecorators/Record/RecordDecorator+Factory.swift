import Logging
import VeneerConfig
import VeneerCore

extension RecordDecorator {
    /// The `record` entry of the registry.
    public static let factory = DecoratorFactory(
        name: "record",
        summary: "writes every exchange to a HAR 1.2 file (credentials redacted, large bodies left out, rotated by size)",
        options: RecordOptions.docs,
        decode: RecordOptions.decode,
        make: { options, inner, context in
            // One writer per file, shared by every record entry naming it and kept across
            // reloads: two writers on one file would overwrite each other's tails.
            let writer = try context.carried.value(for: .shared("record.file", options.file)) {
                try HARWriter(path: options.file, maxFileSize: options.maxFileSize, keep: options.keep)
            }
            var logger = context.logger
            logger[metadataKey: "decorator"] = "record"
            return RecordDecorator(inner: inner, options: options, writer: writer, clock: context.clock, logger: logger)
        }
    )
}
