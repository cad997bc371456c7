import Foundation
import Strata

// S4 OfflineFirst, "Composite + Decorator for a whole offline-first policy", in the article's own vocabulary.
// Every type here is a few lines over a Strata primitive: the article's classes become names for
// loaders Strata already has.

/// Anything that loads raw `Data`: the article's one abstraction. Every Strata `Loader<Void, Data>`
/// is a `DataLoader`.
public protocol DataLoader: Loader where Input == Void, Output == Data {}

extension DataLoader {
    /// The article's name for `load()`.
    public func loadData() async throws -> Data { try await load() }
}

/// The article's errors, one per way a tier can have nothing to give.
public enum DataLoaderError: Error, Equatable, Sendable {
    /// The bundled default file is missing.
    case noSuchFile
    /// Nothing is cached locally.
    case emptyCache
    /// Something is cached, but the cache policy rejects it: it is `age` old.
    case expiredCache(age: Duration)
}

/// How long local data stays valid (the article's `CachePolicy`).
public protocol CachePolicy: Sendable {
    /// The same rule as a Strata freshness policy.
    var freshness: FreshnessPolicy { get }
}

/// Local data is valid for 24 hours after it was saved (exactly 24 hours old is expired).
public struct TwentyFourHoursPolicy: CachePolicy {
    public init() {}
    public var freshness: FreshnessPolicy { .maxAge(.seconds(24 * 3600)) }
}

/// Anything cached is acceptable, however old.
public struct NullPolicy: CachePolicy {
    public init() {}
    public var freshness: FreshnessPolicy { .any }
}

/// Where local data lives: one file in a directory, managed by Strata's `FileStore`.
public struct LocalDataStore: Sendable {
    /// The cache key of the data.
    public static let key = "data"
    let store: FileStore<Data>
    let now: @Sendable () -> Date

    public init(directory: URL, now: @escaping @Sendable () -> Date = { Date() }) {
        self.init(fileStore: FileStore(directory: directory, codec: DataCodec()), now: now)
    }

    /// Local data in a `FileStore` configured by the caller (its logger, its limits).
    public init(fileStore: FileStore<Data>, now: @escaping @Sendable () -> Date = { Date() }) {
        self.store = fileStore
        self.now = now
    }

    /// What is saved, with its timestamp (for tests and diagnostics).
    public func saved() async throws -> CacheEntry<Data>? { try await store.retrieve(Self.key) }
}

/// Serves local data while `cachePolicy` accepts it; `emptyCache` / `expiredCache` otherwise.
public struct LocalLoader: DataLoader {
    let local: LocalDataStore
    let cachePolicy: any CachePolicy

    public init(store: LocalDataStore, cachePolicy: any CachePolicy) {
        self.local = store
        self.cachePolicy = cachePolicy
    }

    public func load(_ input: Void) async throws -> Data {
        do {
            return try await local.store.loader(key: LocalDataStore.key, freshness: cachePolicy.freshness).environment(\.now, local.now).load()
        } catch CacheLoadError.empty {
            throw DataLoaderError.emptyCache
        } catch CacheLoadError.expired(_, _, _, let age, _) {
            throw DataLoaderError.expiredCache(age: age)
        }
    }
}

/// Fetches the data from the server (Strata's `HTTPLoader`, body only).
public struct RemoteLoader: DataLoader {
    let http: HTTPLoader<Void>
    /// Throws when the answer is not data the app can use.
    let check: @Sendable (HTTPReply) throws -> Void

    /// Fetches whatever the server answers with a 2xx.
    public init(url: URL, client: any HTTPTransport = URLSessionHTTPClient.shared) {
        self.http = HTTPLoader(url: url, transport: client)
        self.check = { _ in }
    }

    /// Fetches data that must decode, as JSON, as `payload`. A body that does not (truncated, the
    /// wrong shape) throws `HTTPError.decoding` with the URL, so a cache decorator above never saves it.
    public init<Payload: Decodable & Sendable>(
        url: URL, expecting payload: Payload.Type, client: any HTTPTransport = URLSessionHTTPClient.shared
    ) {
        self.http = HTTPLoader(url: url, transport: client)
        self.check = { reply in
            do {
                _ = try JSONDecoder().decode(Payload.self, from: reply.body)
            } catch {
                throw reply.decodingFailure(type: Payload.self, error: error)
            }
        }
    }

    public func load(_ input: Void) async throws -> Data {
        let reply = try await http.load()
        try check(reply)
        return reply.body
    }
}

/// Serves `default_data.json` shipped in the bundle; `noSuchFile` when it is missing.
public struct DefaultLoader: DataLoader {
    let bundled: BundledLoader

    /// The default data of this module's bundle.
    public init() {
        self.init(resource: "default_data", in: .module)
    }

    /// A default data file `name.json` in `bundle`.
    public init(resource name: String, in bundle: Bundle) {
        self.bundled = BundledLoader(resource: name, withExtension: "json", in: bundle)
    }

    public func load(_ input: Void) async throws -> Data {
        do {
            return try await bundled.load()
        } catch BundledResourceError.notFound {
            throw DataLoaderError.noSuchFile
        }
    }
}

/// The article's cache decorator: Strata's write-through `writingThrough(in:key:)` under the article's name,
/// stamping entries with the store's own clock (`LocalDataStore(directory:now:)`).
public typealias DataLoaderCacheDecorator<Decoratee: DataLoader> = EnvironmentLoader<WritingThroughLoader<Decoratee, FileStore<Data>>>

/// The article's fallback composite: Strata's `FallingBackLoader` under the article's name, with the
/// article's initialiser `DataLoaderWithFallbackComposite(primary:fallback:)`.
public typealias DataLoaderWithFallbackComposite<Primary: DataLoader, Fallback: DataLoader> = FallingBackLoader<Primary, Fallback>

extension WritingThroughLoader: DataLoader where Base.Input == Void, Base.Output == Data {}
extension EnvironmentLoader: DataLoader where Base.Input == Void, Base.Output == Data {}
extension FallingBackLoader: DataLoader where Primary.Input == Void, Primary.Output == Data {}
extension NamedLoader: DataLoader where Base.Input == Void, Base.Output == Data {}
extension ClosureLoader: DataLoader where Input == Void, Output == Data {}
extension AnyLoader: DataLoader where Input == Void, Output == Data {}

extension DataLoader {
    /// Saves what this loader fetches into `store`: the article's `remote.cache()`, with the store it
    /// writes to named at the composition root instead of hidden inside the remote loader.
    public func cache(in store: LocalDataStore) -> DataLoaderCacheDecorator<Self> {
        writingThrough(in: store.store, key: LocalDataStore.key).environment(\.now, store.now)
    }
}
