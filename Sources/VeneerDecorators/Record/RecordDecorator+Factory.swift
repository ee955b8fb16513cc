import Logging
import VeneerConfig
import VeneerCore

extension RecordDecorator {
    /// The `record` entry of the registry.
    public static let factory = DecoratorFactory(
        name: "record",
        summary: "writes every exchange to a HAR 1.2 file (credentials redacted, large bodies left out, rotated by size)",
        options: RecordOptions.docs,
        readsRequestBodies: true,
        decode: RecordOptions.decode,
        make: { options, inner, context in
            // One writer per file for the life of the instance, whatever the spelling of its
            // path and whatever the chains between (a switch to an environment without record
            // and back while a recorded request still runs): two writers on one file would
            // overwrite each other's entries.
            let writer = try context.carried.lasting(for: .shared("record.file", HARWriter.canonicalPath(options.file))) {
                try HARWriter(path: options.file, maxFileSize: options.maxFileSize, keep: options.keep)
            }
            context.carried.whenCommitted { writer.setRotation(maxFileSize: options.maxFileSize, keep: options.keep) }
            var logger = context.logger
            logger[metadataKey: "decorator"] = "record"
            var decorator = RecordDecorator(inner: inner, options: options, writer: writer, clock: context.clock, logger: logger)
            decorator.buffers = context.buffers
            return decorator
        }
    )
}
