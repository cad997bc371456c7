import Foundation
@_spi(StrataInternals) import Strata
import StrataOutbox

/// What a live query shows, in one value: the value and where it came from, whether a load runs or
/// waits and why, how old and how stale it is, what went wrong last.
///
/// `status` (is there a value?) and `phase` (is work going on?) are independent: a query can show a
/// value and be fetching (a refresh), show a value and have failed its last refresh (`lastError`
/// set, `status` still `.value`), or be empty and paused offline.
public struct QuerySnapshot<Value: Sendable>: Sendable {
    /// Whether the query has something to show.
    public enum Status: String, Sendable, Hashable {
        /// No value, no error yet (a query that has not answered).
        case empty
        /// A value is shown (``QuerySnapshot/value``), possibly with a failed refresh since.
        case value
        /// No value, and the last load failed (``QuerySnapshot/lastError``).
        case failed
    }

    /// The value shown, if any. (The first stored property, at offset 0 whatever `Value` is: a
    /// view's read of it needs no lookup of the snapshot's layout.)
    public var value: Value?
    /// Where the shown value came from (tier, origin, age at the time it was served, pending writes).
    public var provenance: Provenance?
    /// Whether there is a value, or an error instead.
    public var status: Status
    /// Whether a load runs, waits, or nothing happens.
    public var phase: QueryPhase
    /// Whether the shown value is older than the query's `staleAfter`, or was invalidated: the next
    /// trigger refetches it.
    public var isStale: Bool
    /// When the shown value was stored (by its tier), or `nil` without a value.
    public var storedAt: Date?
    /// When the shown value was last set (a load answered), by the query's clock.
    public var updatedAt: Date?
    /// The error of the last load, until one succeeds.
    public var lastError: QueryError?
    /// The number of loads that failed in a row (0 after a success).
    public var failureCount: Int
    /// Whether the value is a stand-in (the previous key's value while a new key loads).
    public var isPlaceholder: Bool
    /// Why the last load ran (also while it runs: ``QueryPhase/fetching(_:)``). A load that
    /// continues after a pause (offline, a retry's delay) keeps the reason it started with.
    public var lastFetchReason: FetchReason?

    /// The number of pending writes shown in the value (`Provenance/pendingWrites`).
    public var pendingWrites: Int { provenance?.pendingWrites ?? 0 }

    /// Whether a load runs now.
    public var isFetching: Bool {
        if case .fetching = phase { true } else { false }
    }
}

extension QuerySnapshot: Equatable where Value: Equatable {
    /// Whether every field is equal. The value is compared last: a query's code runs unspecialised
    /// (the value's type is the app's), where the value's `==` is a witness call behind metadata
    /// lookups, and most changes (a phase, staleness, an error) differ before it.
    public static func == (lhs: QuerySnapshot, rhs: QuerySnapshot) -> Bool {
        lhs.phase == rhs.phase && lhs.isStale == rhs.isStale && lhs.status == rhs.status
            && lhs.failureCount == rhs.failureCount && lhs.storedAt == rhs.storedAt && lhs.updatedAt == rhs.updatedAt
            && lhs.isPlaceholder == rhs.isPlaceholder && lhs.lastFetchReason == rhs.lastFetchReason
            && lhs.provenance == rhs.provenance && lhs.lastError == rhs.lastError && lhs.value == rhs.value
    }
}

/// Whether work goes on for a query, independent of whether it has a value.
public enum QueryPhase: Sendable, Hashable, CustomStringConvertible {
    /// Nothing runs or waits.
    case idle
    /// A load runs, for this reason.
    case fetching(FetchReason)
    /// A load is due but waits.
    case paused(PauseReason)

    public var description: String {
        switch self {
        case .idle: "idle"
        case .fetching(let reason): "fetching (\(reason))"
        case .paused(let reason): "paused (\(reason))"
        }
    }
}

/// Why a query's load waits instead of running.
public enum PauseReason: String, Sendable, Hashable, CustomStringConvertible {
    /// The network is unreachable: the load runs when it returns (it continues, it does not start over).
    case offline
    /// The last attempt failed; the next one runs after the query's retry delay.
    case backingOff
    /// The query has no key yet (a dependent query): it never fetches until enabled.
    case disabled

    public var description: String {
        switch self {
        case .offline: "offline"
        case .backingOff: "backing off"
        case .disabled: "disabled"
        }
    }
}

/// Why a query's load ran: in its snapshot while it runs and after, and in the inspector.
public enum FetchReason: String, Sendable, Hashable, CustomStringConvertible {
    /// The query had no observer and got one.
    case firstObserver = "first observer"
    /// Another observer came to a stale query.
    case newObserver = "new observer"
    /// The network came back.
    case reconnect
    /// The app came to the foreground.
    case foreground
    /// The query's refetch interval passed.
    case interval
    /// The query's key, a prefix of it or one of its tags was invalidated.
    case invalidated
    /// Code asked for it (``Query/refetch()``).
    case refetch
    /// A paged query's next page (``Query/fetchNextPage()``).
    case nextPage = "next page"
    /// A paged query's previous page (``Query/fetchPreviousPage()``).
    case previousPage = "previous page"
    /// Code awaited the value, or asked for it ahead of time (``Query/fetch()``,
    /// ``Query/ensureValue()``, ``Query/prefetch()``).
    case fetch

    public var description: String { rawValue }
}

/// A failed load as a query keeps it: the error, its type and description.
///
/// Errors are not `Equatable`; a snapshot compares them by type and description, so the same failure
/// twice is one change, not two.
public struct QueryError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The error the chain threw.
    public var underlying: any Error
    /// `String(describing:)` of the error's type.
    public var type: String
    public var description: String

    public init(_ error: any Error) {
        if let error = error as? QueryError {
            self = error
            return
        }
        underlying = error
        type = String(describing: Swift.type(of: error))
        description = String(describing: error)
    }

    public static func == (lhs: QueryError, rhs: QueryError) -> Bool {
        lhs.type == rhs.type && lhs.description == rhs.description
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(type)
        hasher.combine(description)
    }
}

/// How a query treats the network being away.
public enum NetworkMode: String, Sendable, Hashable {
    /// While offline no load starts: the query pauses (`paused(offline)`) and loads when the
    /// network returns.
    case online
    /// While offline the query's first load still runs (the chain's local tiers can answer without
    /// the network); a load that fails offline, and every refetch, pauses until the network returns.
    /// The default.
    case offlineFirst
    /// The network's state is not consulted.
    case always
}
