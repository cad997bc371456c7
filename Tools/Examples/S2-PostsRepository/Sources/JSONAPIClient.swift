import Foundation
import Strata

/// The article's `HTTPClient`: a JSON API addressed by path, with generic Codable `get` and `post`.
///
/// It is named `JSONAPIClient` because `HTTPClient` is AsyncHTTPClient's type and Strata has an `HTTPTransport`: the lower seam that sends
/// one raw request. This one sits above it and speaks in types, not bytes.
///
/// ## Contract
/// - `get` and `post` resolve `path` against the client's base URL.
/// - `post` encodes one value to the same bytes every time, so a resend with the same
///   `Idempotency-Key` is the same request.
/// - A non-2xx answer throws Strata's `HTTPError.status`, no answer `HTTPError.transport`, a body that
///   does not decode `HTTPError.decoding`; every case carries the URL.
public protocol JSONAPIClient: Sendable {
    /// `GET path`, decoding the body as `T`.
    func get<T: Decodable & Sendable>(_ path: String, as type: T.Type) async throws -> T
    /// `POST path` with `body` as JSON and `headerFields` added to the request, decoding the answer as `T`.
    func post<Body: Encodable & Sendable, T: Decodable & Sendable>(
        _ path: String, body: Body, headerFields: HTTPFields, as type: T.Type
    ) async throws -> T
}

extension JSONAPIClient {
    /// `POST path` with `body` as JSON, decoding the answer as `T`.
    public func post<Body: Encodable & Sendable, T: Decodable & Sendable>(_ path: String, body: Body, as type: T.Type) async throws -> T {
        try await post(path, body: body, headerFields: [:], as: type)
    }

    /// `GET path`, decoding the body as the type the caller expects.
    public func get<T: Decodable & Sendable>(_ path: String) async throws -> T {
        try await get(path, as: T.self)
    }

    /// `POST path` with `body` as JSON, decoding the answer as the type the caller expects.
    public func post<Body: Encodable & Sendable, T: Decodable & Sendable>(_ path: String, body: Body) async throws -> T {
        try await post(path, body: body, as: T.self)
    }
}

/// A ``JSONAPIClient`` built from Strata's `HTTPLoader`, sending through any Strata `HTTPTransport`
/// (`URLSessionHTTPClient` by default).
///
/// ```swift
/// let api = HTTPJSONAPIClient(baseURL: URL(string: "https://api.example.com")!)
/// let post: Post = try await api.get("posts/1")
/// ```
public struct HTTPJSONAPIClient: JSONAPIClient {
    /// Paths are resolved against this URL (its own path is kept: `…/v1` + `posts/1` → `…/v1/posts/1`).
    public let baseURL: URL
    /// The transport that sends each request.
    public let transport: any HTTPTransport

    /// A client for the API at `baseURL`, sending through `transport`.
    public init(baseURL: URL, transport: any HTTPTransport = URLSessionHTTPClient.shared) {
        self.baseURL = baseURL
        self.transport = transport
    }

    /// Bodies are JSON with sorted keys: the same value always encodes to the same bytes. A create
    /// sent again with the same `Idempotency-Key` is then the same request to a server that
    /// fingerprints requests, which refuses a key reused with a different body (422, as the IETF
    /// draft says); without sorting, the key order of two encodings of one value may differ.
    @Sendable public static func stableEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }

    /// The absolute URL of `path`; a leading `/` is allowed and does not drop the base URL's path.
    public func url(for path: String) -> URL {
        let relative = path.drop { $0 == "/" }
        return relative.isEmpty ? baseURL : baseURL.appendingPathComponent(String(relative))
    }

    public func get<T: Decodable & Sendable>(_ path: String, as type: T.Type) async throws -> T {
        try await HTTPLoader.get(transport: transport) { (url: URL) in url }
            .decoding(T.self)
            .load(url(for: path))
    }

    public func post<Body: Encodable & Sendable, T: Decodable & Sendable>(
        _ path: String, body: Body, headerFields: HTTPFields, as type: T.Type
    ) async throws -> T {
        try await HTTPLoader<Body>.postJSON(
            to: url(for: path), headerFields: headerFields, encoder: Self.stableEncoder, transport: transport)
            .decoding(T.self)
            .load(body)
    }
}
