import Foundation

/// A resource that should ship with the app is missing or unreadable.
public enum BundledResourceError: Error, Sendable, CustomStringConvertible {
    /// The bundle has no such resource (the offline-first example's `noSuchFile`).
    case notFound(resource: String, bundle: String)
    /// The resource exists but could not be read.
    case unreadable(url: URL, underlying: any Error)

    public var description: String {
        switch self {
        case .notFound(let resource, let bundle): "no resource '\(resource)' in bundle \(bundle)"
        case .unreadable(let url, let underlying): "bundled resource \(url.path) is unreadable: \(underlying)"
        }
    }
}

/// Loads default data shipped in a bundle, as bytes: the last tier of an offline-first chain.
///
/// ```swift
/// let defaults = BundledLoader(resource: "default_feed", withExtension: "json", in: .module)
///     .decoding([FeedItem].self)
/// ```
/// Values are reported with origin ``Origin/bundled``.
public struct BundledLoader: Loader {
    public typealias Input = Void
    public typealias Output = Data

    /// The resource's file name, as given.
    public let resource: String
    /// Where the resource was found; `nil` when the bundle does not have it.
    public let url: URL?
    private let bundlePath: String

    /// Looks `resource` up in `bundle` now; loading a missing one throws ``BundledResourceError/notFound(resource:bundle:)``.
    public init(resource: String, withExtension ext: String? = nil, in bundle: Bundle = .main) {
        self.resource = ext.map { "\(resource).\($0)" } ?? resource
        self.url = bundle.url(forResource: resource, withExtension: ext)
        self.bundlePath = bundle.bundlePath
    }

    /// Serves the file at `url` (for defaults that live outside a bundle).
    public init(fileURL: URL) {
        self.resource = fileURL.lastPathComponent
        self.url = FileManager.default.fileExists(atPath: fileURL.path) ? fileURL : nil
        self.bundlePath = fileURL.deletingLastPathComponent().path
    }

    public func load(_ input: Void) async throws -> Data {
        try await load(input, in: .current)
    }

    /// `@concurrent`: reading the file blocks, so it never runs on the caller's actor.
    @concurrent
    public func load(_ input: Void, in context: LoadContext) async throws -> Data {
        guard let url else { throw BundledResourceError.notFound(resource: resource, bundle: bundlePath) }
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw BundledResourceError.unreadable(url: url, underlying: error)
        }
        context.record(.served(Provenance(origin: .bundled, tier: context.tierName(default: description))))
        return data
    }
}

extension BundledLoader: CustomStringConvertible {
    public var description: String { "bundled \(resource)" }
}
