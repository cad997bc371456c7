import Foundation
import Logging

/// A store in `UserDefaults`, one defaults key per entry: for the small-data case of the source
/// articles (a short feed, a few posts). Use ``FileStore`` for anything large.
///
/// Entries are stored as `Data` in the same versioned envelope ``FileStore`` uses, under
/// `keyPrefix + key`; an unreadable entry (not data, not an entry, or a value that no longer decodes)
/// is a miss: it is removed and logged at `warning`.
public final class UserDefaultsStore<Value: Sendable>: Store, Sendable {
    public typealias Key = String

    /// The suite this store writes to (`nil` for `UserDefaults.standard`).
    public let suiteName: String?
    /// Prepended to every key so the store's entries never collide with the app's own defaults.
    public let keyPrefix: String
    private let codec: any Codec<Value>
    private let logger: Logger

    /// Creates a store in the defaults suite `suiteName` (`nil` for the standard defaults).
    /// - Parameters:
    ///   - suiteName: the defaults suite (`nil`: the standard defaults). On Linux it becomes a file
    ///     name, so it must come from trusted code; keys never do.
    ///   - keyPrefix: prepended to every key, so entries never collide with the app's own defaults.
    ///   - codec: turns values into the entry's payload bytes and back.
    ///   - logger: where unreadable entries are reported (at `warning`) as they are removed.
    public init(
        suiteName: String? = nil, keyPrefix: String = "strata.", codec: some Codec<Value>,
        logger: Logger = Logger(label: "strata.userdefaultsstore")
    ) {
        self.suiteName = suiteName
        self.keyPrefix = keyPrefix
        self.codec = codec
        self.logger = logger
    }

    /// Creates a store that encodes values as JSON.
    public convenience init(
        suiteName: String? = nil, keyPrefix: String = "strata.", logger: Logger = Logger(label: "strata.userdefaultsstore")
    ) where Value: Codable {
        self.init(suiteName: suiteName, keyPrefix: keyPrefix, codec: JSONCodec<Value>(), logger: logger)
    }

    public var origin: Origin { .disk }

    // UserDefaults is documented thread-safe but is not `Sendable` on every platform; a store holds
    // only the suite name and opens the suite object on each call. On Linux, concurrent calls can
    // lose writes (a value set, then read back by the same task as missing), so every call, from
    // opening the suite to the last access, runs under one process-wide lock. The data is small by
    // design.
    private func withDefaults<Result>(_ body: (UserDefaults) throws -> Result) throws -> Result {
        try userDefaultsLock.withLock { calls in
            calls &+= 1
            return try body(defaults())
        }
    }

    private func defaults() throws -> UserDefaults {
        guard let suiteName else { return .standard }
        guard let defaults = UserDefaults(suiteName: suiteName) else {
            throw StoreError(store: description, operation: .open, key: nil, reason: "UserDefaults refused suite name '\(suiteName)'")
        }
        return defaults
    }

    @concurrent
    public func retrieve(_ key: String) async throws -> CacheEntry<Value>? {
        try withDefaults { defaults in
            let defaultsKey = keyPrefix + key
            guard let object = defaults.object(forKey: defaultsKey) else { return nil }
            guard let data = object as? Data else {
                discardCorrupt(defaultsKey, key: key, reason: "not data but \(type(of: object))", in: defaults)
                return nil
            }
            guard let (header, payload) = EntryEnvelope.decode(data) else {
                discardCorrupt(defaultsKey, key: key, reason: "not a valid Strata entry (\(data.count) bytes)", in: defaults)
                return nil
            }
            // Another key's entry under ours (copied defaults): not ours to delete, a miss for us.
            guard header.key == key else { return nil }
            let value: Value
            do {
                value = try codec.decode(payload)
            } catch {
                discardCorrupt(defaultsKey, key: key, reason: "payload does not decode: \(error)", in: defaults)
                return nil
            }
            return CacheEntry(value: value, storedAt: header.storedAt, validators: header.validators)
        }
    }

    @concurrent
    public func insert(_ entry: CacheEntry<Value>, for key: String) async throws {
        let data = try EntryEnvelope.encode(entry, key: key, codec: codec, store: description)
        try withDefaults { $0.set(data, forKey: keyPrefix + key) }
    }

    /// Re-stamps the entry for `key` by rewriting its envelope's header around the same payload
    /// bytes (the value is not decoded or encoded again); `false` when there is no readable entry
    /// (an unreadable one is removed, as ``retrieve(_:)`` does).
    @concurrent
    public func refresh(_ key: String, storedAt: Date, validators: CacheValidators) async throws -> Bool {
        try withDefaults { defaults in
            let defaultsKey = keyPrefix + key
            guard let object = defaults.object(forKey: defaultsKey) else { return false }
            guard let data = object as? Data, let (header, payload) = EntryEnvelope.decode(data) else {
                discardCorrupt(defaultsKey, key: key, reason: "not a valid Strata entry", in: defaults)
                return false
            }
            guard header.key == key else { return false }
            defaults.set(EntryEnvelope.encode(key: key, storedAt: storedAt, validators: validators, payload: payload), forKey: defaultsKey)
            return true
        }
    }

    public func delete(_ key: String) async throws {
        try withDefaults { $0.removeObject(forKey: keyPrefix + key) }
    }

    /// Removes every defaults key that starts with ``keyPrefix`` in the suite, in one call under the
    /// store's lock. Stores that share the suite and the prefix share their entries, so it empties
    /// those too; the app's own defaults (without the prefix) are left alone.
    public func removeAll() async throws {
        try withDefaults { defaults in
            for defaultsKey in defaults.dictionaryRepresentation().keys where defaultsKey.hasPrefix(keyPrefix) {
                defaults.removeObject(forKey: defaultsKey)
            }
        }
    }

    private func discardCorrupt(_ defaultsKey: String, key: String, reason: String, in defaults: UserDefaults) {
        logger.warning(
            "removing corrupt cache entry",
            metadata: ["store": "\(description)", "key": "\(key)", "defaultsKey": "\(defaultsKey)", "reason": "\(reason)"])
        defaults.removeObject(forKey: defaultsKey)
    }
}

/// Serialises every ``UserDefaultsStore`` call in the process (see `withDefaults`), and counts them.
/// (It guards a count rather than nothing: ThreadSanitizer reports an access race on a lock whose
/// state is the empty tuple, a zero-sized value with no storage of its own.)
private let userDefaultsLock = Locked<UInt64>(0)

extension UserDefaultsStore: CustomStringConvertible {
    public var description: String { "UserDefaultsStore(\(suiteName ?? "standard"))" }
}
