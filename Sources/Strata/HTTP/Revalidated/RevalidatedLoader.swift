import Foundation
import Logging

/// A revalidating HTTP cache tier: serves a fresh stored value without a request, otherwise asks the
/// server with a conditional request and keeps the answer; built by
/// ``HTTPLoader/revalidated(in:key:freshness:honorsCacheControl:decode:)`` and its variants.
///
/// Time (`now`) and the logger for failed cache reads and writes come from the ``LoadEnvironment``.
///
/// For each load:
/// 1. **Fresh entry** — `policy` accepts its age and, when `honorsCacheControl`, so does the
///    `max-age` the server gave it: the stored value is served, no request is sent. Provenance: the
///    store's origin and the entry's age.
/// 2. **Otherwise** the request is sent with `If-None-Match` (the stored `ETag`) and
///    `If-Modified-Since` (the stored `Last-Modified`) when there is an entry with validators.
/// 3. **304 Not Modified** — the stored value is served, and the entry is re-stamped with
///    ``Store/refresh(_:storedAt:validators:)`` (the value is not re-encoded or rewritten). Recorded
///    as ``LoadEvent/revalidated(store:key:)``; provenance: ``Origin/remote``, age zero.
/// 4. **2xx** — the body is decoded, stored with its `ETag`, `Last-Modified` and freshness lifetime,
///    and served. With `Cache-Control: no-store` (when honoured) nothing is written and an existing
///    entry is left alone; `no-cache` stores the entry as needing revalidation before every use.
///    A `206 Partial Content` is served but not stored.
/// 5. **Anything else** fails with the typed ``HTTPError`` (`status`, `transport`, `decoding`), and
///    the stored entry is untouched, so a ``Loader/fallingBack(to:)`` or
///    ``Loader/servingStaleOnError(in:key:maxStale:)`` after this tier can serve it.
///
/// A failed store read is treated as a miss (logged at `warning`); a failed write or re-stamp is
/// logged, recorded as ``LoadEvent/cacheWriteFailed(store:key:error:)``, and never fails the load.
/// When the task is cancelled, nothing is written and `CancellationError` is thrown.
public struct RevalidatedLoader<Input: Sendable, S: Store>: Loader {
    public typealias Output = S.Value

    /// The loader whose requests are sent (through its client, so a 304 reaches this tier).
    public let http: HTTPLoader<Input>
    /// Where values and their validators are kept.
    public let store: S
    /// The longest the client serves a stored value without asking the server.
    public let policy: FreshnessPolicy
    /// Whether `Cache-Control` (`max-age`, `no-cache`, `no-store`) and `Expires` shorten what
    /// `policy` allows and decide what is stored.
    public let honorsCacheControl: Bool
    let key: @Sendable (Input) -> S.Key
    let decode: @Sendable (HTTPReply) throws -> S.Value

    init(
        http: HTTPLoader<Input>, store: S, policy: FreshnessPolicy, honorsCacheControl: Bool,
        key: @escaping @Sendable (Input) -> S.Key, decode: @escaping @Sendable (HTTPReply) throws -> S.Value
    ) {
        self.http = http
        self.store = store
        self.policy = policy
        self.honorsCacheControl = honorsCacheControl
        self.key = key
        self.decode = decode
    }

    public func load(_ input: Input) async throws -> S.Value {
        try await load(input, in: .current)
    }

    public func load(_ input: Input, in context: LoadContext) async throws -> S.Value {
        let key = key(input)
        let environment = context.environment
        let cached = try await readEntry(key, logger: environment.logger)
        let checkedAt = environment.now()
        // A copy stored at or before `revalidatingSince` is asked about (conditionally), not served.
        if let cached, context.revalidatingSince.map({ cached.storedAt > $0 }) ?? true, isFresh(cached, at: checkedAt) {
            context.record(.served(Provenance(
                origin: store.origin, tier: context.tierName(default: description), storedAt: cached.storedAt,
                age: max(.zero, .between(cached.storedAt, checkedAt)))))
            return cached.value
        }

        var (request, body, url) = try http.makeRequest(input)
        let isConditional = cached.map { Self.addConditions(from: $0.validators, to: &request.headerFields) } ?? false
        let reply = try await http.transport.send(request, body: body, options: http.options)
        try Task.checkCancellation()
        let receivedAt = environment.now()

        if reply.status == .notModified, isConditional, let cached {
            await confirm(cached, key: key, fields: reply.headerFields, at: receivedAt, in: context)
            return cached.value
        }
        try checkReply(reply, to: request, url: url, options: http.options)
        let value = try await decodeBody(reply)
        context.record(.served(Provenance(origin: .remote, tier: context.tierName(default: description), age: .zero)))
        if reply.status != .partialContent, !(honorsCacheControl && reply.headerFields.cacheControl.noStore) {
            await store.insertReportingFailure(
                value, for: key, storedAt: receivedAt, validators: Self.validators(of: reply.headerFields, receivedAt: receivedAt), in: context)
        }
        return value
    }

    /// Whether `entry` may be served at `now` without asking the server.
    func isFresh(_ entry: CacheEntry<S.Value>, at now: Date) -> Bool {
        guard policy.isFresh(storedAt: entry.storedAt, now: now) else { return false }
        guard honorsCacheControl, let serverMaxAge = entry.validators.maxAge else { return true }
        let age = Duration.between(entry.storedAt, now)
        return age >= .zero && age < serverMaxAge
    }

    /// The stored entry, or `nil` when there is none or the store cannot be read (a cache that fails
    /// to read must not stop the request).
    private func readEntry(_ key: S.Key, logger: Logger) async throws -> CacheEntry<S.Value>? {
        do {
            return try await store.retrieve(key)
        } catch {
            try rethrowIfCancelled(error)
            logger.warning(
                "cache read failed; loading from the server without validators",
                metadata: ["store": "\(store.storeDescription)", "key": "\(key)", "error": "\(error)"])
            return nil
        }
    }

    /// Serves a 304: re-stamps the entry with the merged validators unless the answer says `no-store`.
    private func confirm(_ cached: CacheEntry<S.Value>, key: S.Key, fields: HTTPFields, at receivedAt: Date, in context: LoadContext) async {
        let logger = context.environment.logger
        let tier = context.tierName(default: description)
        // Confirmed by the server just now: reported like a fresh fetch (no stored-at, age zero).
        context.record(.served(Provenance(origin: .remote, tier: tier, age: .zero)))
        if honorsCacheControl && fields.cacheControl.noStore { return }
        // RFC 9111 §4.3.4: the 304's own header fields update the stored ones; the rest are kept.
        let validators = CacheValidators(
            etag: fields[.eTag] ?? cached.validators.etag,
            lastModified: fields[.lastModified] ?? cached.validators.lastModified,
            maxAge: fields.hasFreshnessFields ? fields.freshnessLifetime(receivedAt: receivedAt) : cached.validators.maxAge)
        do {
            if try await store.refresh(key, storedAt: receivedAt, validators: validators) {
                context.record(.revalidated(store: store.storeDescription, key: "\(key)"))
            } else {
                logger.debug(
                    "entry removed while it was revalidated; not stored again",
                    metadata: ["store": "\(store.storeDescription)", "key": "\(key)"])
            }
        } catch {
            logger.warning(
                "cache re-stamp failed; the load still succeeds and the previous entry is kept",
                metadata: ["store": "\(store.storeDescription)", "key": "\(key)", "error": "\(error)"])
            context.record(.cacheWriteFailed(store: store.storeDescription, key: "\(key)", error: error))
        }
    }

    /// `@concurrent`: decoding a body is CPU work that must not hold the caller's actor (a fresh hit
    /// above is answered on it; a new body is decoded on the global executor).
    @concurrent
    private func decodeBody(_ reply: HTTPReply) async throws -> S.Value {
        do {
            return try decode(reply)
        } catch let error as HTTPError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw HTTPError.decoding(url: reply.url, type: String(describing: S.Value.self), underlying: error)
        }
    }

    /// Adds `If-None-Match` / `If-Modified-Since` for `validators`, replacing any the request had
    /// (every field of that name, whatever its case); returns whether the request is now conditional.
    static func addConditions(from validators: CacheValidators, to fields: inout HTTPFields) -> Bool {
        if let etag = validators.etag { fields[.ifNoneMatch] = etag }
        if let lastModified = validators.lastModified { fields[.ifModifiedSince] = lastModified }
        return validators.etag != nil || validators.lastModified != nil
    }

    /// What is stored with a 2xx response's value.
    static func validators(of fields: HTTPFields, receivedAt: Date) -> CacheValidators {
        CacheValidators(
            etag: fields[.eTag], lastModified: fields[.lastModified],
            maxAge: fields.freshnessLifetime(receivedAt: receivedAt))
    }
}

extension RevalidatedLoader: CustomStringConvertible {
    public var description: String {
        "\(http.chainSummary) + revalidated(in: \(store.storeDescription), \(policy)\(honorsCacheControl ? ", Cache-Control" : ""))"
    }
}

extension HTTPLoader {
    /// A revalidating HTTP cache for this request: fresh entries are served from `store`, stale ones
    /// are revalidated with `If-None-Match` / `If-Modified-Since`, a 304 re-stamps the entry, and a
    /// 200 is decoded with `decode` and stored with its validators. See ``RevalidatedLoader``.
    ///
    /// ```swift
    /// let feed = HTTPLoader(url: feedURL).revalidated(in: store, key: "feed", freshness: .maxAge(.seconds(60))) { reply in
    ///     try JSONDecoder().decode([FeedItem].self, from: reply.body)
    /// }
    /// ```
    /// - Parameters:
    ///   - store: where values and their validators are kept.
    ///   - key: the key every value is stored under.
    ///   - policy: the longest a stored value is served without asking the server; `.maxAge(.zero)`
    ///     asks every time.
    ///   - honorsCacheControl: let the server's `Cache-Control` / `Expires` shorten `policy`
    ///     (`max-age`, `no-cache`) and forbid storing (`no-store`). On by default.
    ///   - decode: turns a 2xx reply into the value; an error it throws becomes
    ///     ``HTTPError/decoding(url:type:underlying:)`` (an `HTTPError` passes through).
    public func revalidated<S: Store>(
        in store: S, key: S.Key, freshness policy: FreshnessPolicy, honorsCacheControl: Bool = true,
        decode: @escaping @Sendable (HTTPReply) throws -> S.Value
    ) -> RevalidatedLoader<Input, S> {
        RevalidatedLoader(
            http: self, store: store, policy: policy, honorsCacheControl: honorsCacheControl,
            key: { _ in key }, decode: decode)
    }

    /// A revalidating HTTP cache whose bodies are JSON-decoded as `type`; see
    /// ``revalidated(in:key:freshness:honorsCacheControl:decode:)``.
    ///
    /// ```swift
    /// let feed = HTTPLoader(url: feedURL)
    ///     .revalidated(in: store, key: "feed", freshness: .maxAge(.seconds(5 * 60)), decoding: [FeedItem].self)
    /// ```
    /// - Parameters:
    ///   - store: where values and their validators are kept.
    ///   - key: the key every value is stored under.
    ///   - policy: the longest a stored value is served without asking the server.
    ///   - honorsCacheControl: let the server's `Cache-Control` / `Expires` shorten `policy` and
    ///     forbid storing. On by default.
    ///   - type: the type the JSON body decodes to.
    ///   - decoder: makes the decoder for each response (for example to set a date strategy).
    public func revalidated<S: Store>(
        in store: S, key: S.Key, freshness policy: FreshnessPolicy, honorsCacheControl: Bool = true,
        decoding type: S.Value.Type = S.Value.self, decoder: @escaping @Sendable () -> JSONDecoder = { JSONDecoder() }
    ) -> RevalidatedLoader<Input, S> where S.Value: Decodable {
        revalidated(in: store, key: key, freshness: policy, honorsCacheControl: honorsCacheControl) { reply in
            try decoder().decode(S.Value.self, from: reply.body)
        }
    }

    /// The keyed form of ``revalidated(in:key:freshness:honorsCacheControl:decode:)``: the store
    /// key comes from the input.
    ///
    /// ```swift
    /// let posts = HTTPLoader.get { (id: Int) in baseURL.appending(path: "posts/\(id)") }
    ///     .revalidated(in: postStore, freshness: .maxAge(.seconds(1 * 60))) { id in "post-\(id)" } decode: { reply in
    ///         try JSONDecoder().decode(Post.self, from: reply.body)
    ///     }
    /// ```
    /// - Parameters:
    ///   - store: where values and their validators are kept.
    ///   - policy: the longest a stored value is served without asking the server.
    ///   - honorsCacheControl: let the server's `Cache-Control` / `Expires` shorten `policy` and
    ///     forbid storing. On by default.
    ///   - key: the store key for an input.
    ///   - decode: turns a 2xx reply into the value.
    public func revalidated<S: Store>(
        in store: S, freshness policy: FreshnessPolicy, honorsCacheControl: Bool = true,
        key: @escaping @Sendable (Input) -> S.Key, decode: @escaping @Sendable (HTTPReply) throws -> S.Value
    ) -> RevalidatedLoader<Input, S> {
        RevalidatedLoader(
            http: self, store: store, policy: policy, honorsCacheControl: honorsCacheControl,
            key: key, decode: decode)
    }

    /// The keyed form of ``revalidated(in:key:freshness:honorsCacheControl:decoding:decoder:)``.
    ///
    /// ```swift
    /// let posts = HTTPLoader.get { (id: Int) in baseURL.appending(path: "posts/\(id)") }
    ///     .revalidated(in: postStore, freshness: .maxAge(.seconds(1 * 60)), decoding: Post.self) { id in "post-\(id)" }
    /// ```
    /// - Parameters:
    ///   - store: where values and their validators are kept.
    ///   - policy: the longest a stored value is served without asking the server.
    ///   - honorsCacheControl: let the server's `Cache-Control` / `Expires` shorten `policy` and
    ///     forbid storing. On by default.
    ///   - type: the type the JSON body decodes to.
    ///   - decoder: makes the decoder for each response.
    ///   - key: the store key for an input.
    public func revalidated<S: Store>(
        in store: S, freshness policy: FreshnessPolicy, honorsCacheControl: Bool = true,
        decoding type: S.Value.Type = S.Value.self, decoder: @escaping @Sendable () -> JSONDecoder = { JSONDecoder() },
        key: @escaping @Sendable (Input) -> S.Key
    ) -> RevalidatedLoader<Input, S> where S.Value: Decodable {
        revalidated(in: store, freshness: policy, honorsCacheControl: honorsCacheControl, key: key) { reply in
            try decoder().decode(S.Value.self, from: reply.body)
        }
    }
}
