import Foundation

/// HTTP validators (`ETag`, `Last-Modified`) and the server's freshness lifetime, stored beside a
/// cached value.
public struct CacheValidators: Sendable, Hashable {
    /// The response's `ETag` header, sent back as `If-None-Match`.
    public var etag: String?
    /// The response's `Last-Modified` header, sent back as `If-Modified-Since`.
    public var lastModified: String?
    /// How long the server said the response stays fresh, counted from `storedAt`:
    /// `Cache-Control: max-age` (less any `Age`), or `Expires` minus `Date`; zero for `no-cache`;
    /// `nil` when the server said nothing.
    public var maxAge: Duration?

    public init(etag: String? = nil, lastModified: String? = nil, maxAge: Duration? = nil) {
        self.etag = etag
        self.lastModified = lastModified
        self.maxAge = maxAge
    }

    /// No validators.
    public static let none = CacheValidators()
}
