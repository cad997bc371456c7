import Foundation

/// Where a served value came from.
public enum Origin: Sendable, Hashable, CustomStringConvertible {
    /// An in-memory cache.
    case memory
    /// A persistent local cache (files, user defaults, a database on this machine).
    case disk
    /// A shared cache on another machine (for example PostgreSQL).
    case sharedCache
    /// The remote source of truth, fetched for this load.
    case remote
    /// Default data shipped with the app.
    case bundled
    /// A source named by the application.
    case custom(String)
    /// No loader in the chain reported an origin.
    case unknown

    public var description: String {
        switch self {
        case .memory: "memory"
        case .disk: "disk"
        case .sharedCache: "shared cache"
        case .remote: "remote"
        case .bundled: "bundled default"
        case .custom(let name): name
        case .unknown: "unknown"
        }
    }
}
