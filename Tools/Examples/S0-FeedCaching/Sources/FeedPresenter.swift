import Strata

/// The words a person sees about a feed load: where the items came from, and what went wrong.
///
/// Kept apart from ``FeedViewModel`` so that any front end (the view model, the command line, a web
/// page) says the same things.
public enum FeedPresenter {
    /// Where the shown items came from and how old they are, from Strata's provenance.
    ///
    /// `"from the server, just now"`, `"saved on this device 2h 0m ago"`, `"saved on this device"`
    /// (age unknown), `"source unknown"` when nothing in the chain reported a source.
    public static func sourceText(for provenance: Provenance) -> String {
        let age = provenance.age.map { " \(($0).formattedAge) ago" } ?? ""
        switch provenance.origin {
        case .remote: return "from the server, just now"
        case .disk: return "saved on this device" + age
        case .memory: return "kept in memory" + age
        case .sharedCache: return "from a shared cache" + age
        case .bundled: return "built-in default feed"
        case .custom(let name): return "from \(name)" + age
        case .unknown: return "source unknown"
        }
    }

    /// A message for a failed load that a person can act on; no URLs, types or stack traces.
    public static func errorMessage(for error: any Error) -> String {
        switch error {
        case let error as HTTPError:
            switch error {
            case .transport:
                return "Can't reach the server. Check your connection and try again."
            case .status(let code, _, _, _) where code >= 500:
                return "The server is having trouble (error \(code)). Please try again later."
            case .status(let code, _, _, _):
                return "The feed isn't available right now (error \(code))."
            case .decoding:
                return "The server sent a feed this app can't read. Please try again later."
            case .invalidRequest:
                return "The feed couldn't be requested. Please update the app."
            case .bodyTooLarge:
                return "The server sent a feed too large to load. Please try again later."
            }
        case let error as FallbackError where !error.failures.isEmpty:
            return errorMessage(for: error.failures[0].error)
        case is CancellationError:
            return "Loading was cancelled."
        default:
            return "Something went wrong while loading the feed. Please try again."
        }
    }
}
