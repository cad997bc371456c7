import Foundation
import Logging

/// A persistent store with one file per key in a directory.
///
/// - File names are the SHA-256 of the key, so any key (`"../../etc/passwd"`, emoji, 10 KB of text)
///   maps to a fixed-length name inside the directory.
/// - Writes go to a temporary file in the same directory, are flushed, then renamed over the entry:
///   readers and other processes see the old entry or the new one, never a torn one, and a failed
///   write leaves the previous entry untouched.
/// - Files are created with mode `0600`, the directory (created on first write) with `0700`.
/// - An entry that does not parse or decode is a miss: it is removed and logged at `warning`.
/// - Two `FileStore`s on the same directory, in one process or several, see each other's writes.
///
/// ```swift
/// let store = FileStore<[FeedItem]>(directory: cachesDirectory.appending(path: "feed"))
/// ```
public final class FileStore<Value: Sendable>: Store, Sendable {
    public typealias Key = String

    /// The directory holding the entries.
    public let directory: URL
    private let directoryPath: String
    private let codec: any Codec<Value>
    private let synchronizesWrites: Bool
    private let logger: Logger

    /// Creates a store in `directory` that encodes values with `codec`.
    /// - Parameters:
    ///   - directory: the directory holding the entries; created (mode `0700`) on the first write.
    ///   - codec: turns values into bytes and back.
    ///   - synchronizesWrites: flush each entry to stable storage (`fsync`) before it replaces the old
    ///     one. On by default; turn off only for caches you can afford to lose on power failure.
    ///   - logger: where corrupt entries and removal failures are reported.
    public init(
        directory: URL,
        codec: some Codec<Value>,
        synchronizesWrites: Bool = true,
        logger: Logger = Logger(label: "strata.filestore")
    ) {
        self.directory = directory.standardizedFileURL
        self.directoryPath = self.directory.path
        self.codec = codec
        self.synchronizesWrites = synchronizesWrites
        self.logger = logger
    }

    /// Creates a store in `directory` that encodes values as JSON.
    public convenience init(
        directory: URL,
        synchronizesWrites: Bool = true,
        logger: Logger = Logger(label: "strata.filestore")
    ) where Value: Codable {
        self.init(directory: directory, codec: JSONCodec<Value>(), synchronizesWrites: synchronizesWrites, logger: logger)
    }

    public var origin: Origin { .disk }

    /// The file that holds (or would hold) the entry for `key`.
    public func fileURL(for key: String) -> URL {
        directory.appendingPathComponent(SHA256.hexDigest(key), isDirectory: false)
    }

    public func retrieve(_ key: String) async throws -> Cached<Value>? {
        let path = fileURL(for: key).path
        let contents: (data: Data, inode: UInt64)?
        do {
            contents = try POSIXFile.read(path)
        } catch {
            throw StoreError(store: description, operation: .retrieve, key: key, reason: "\(error)", underlying: error)
        }
        guard let contents else { return nil }
        guard let (header, payload) = EntryEnvelope.decode(contents.data) else {
            discardCorrupt(path: path, inode: contents.inode, key: key, reason: "not a valid Strata entry (\(contents.data.count) bytes)")
            return nil
        }
        guard header.key == key else {
            // Another key's entry under our file name: only a hash collision or a copied file can do
            // this. It is not ours to delete; for us it is a miss.
            return nil
        }
        do {
            let value = try codec.decode(payload)
            return Cached(value: value, storedAt: header.storedAt, validators: header.validators)
        } catch {
            discardCorrupt(path: path, inode: contents.inode, key: key, reason: "payload does not decode: \(error)")
            return nil
        }
    }

    public func insert(_ entry: Cached<Value>, for key: String) async throws {
        let bytes = try EntryEnvelope.encode(entry, key: key, codec: codec, store: description)
        let path = fileURL(for: key).path
        let temporaryPath = directoryPath + "/.tmp-" + UUID().uuidString
        do {
            try POSIXFile.createDirectory(directoryPath, mode: 0o700)
            try POSIXFile.writeAtomically(bytes, to: path, via: temporaryPath, mode: 0o600, sync: synchronizesWrites)
        } catch {
            throw StoreError(store: description, operation: .insert, key: key, reason: "\(error)", underlying: error)
        }
    }

    public func delete(_ key: String) async throws {
        do {
            try POSIXFile.remove(fileURL(for: key).path)
        } catch {
            throw StoreError(store: description, operation: .delete, key: key, reason: "\(error)", underlying: error)
        }
    }

    private func discardCorrupt(path: String, inode: UInt64, key: String, reason: String) {
        logger.warning(
            "removing corrupt cache entry",
            metadata: ["store": "\(description)", "key": "\(key)", "file": "\(path)", "reason": "\(reason)"])
        POSIXFile.remove(path, ifInode: inode)
    }
}

extension FileStore: CustomStringConvertible {
    public var description: String { "FileStore(\(directoryPath))" }
}
