@_spi(StrataInternals) import Strata
import Atomics

/// The proxy's counters, served at `/_strata/metrics` in Prometheus' text format.
final class ProxyMetrics: Sendable {
    /// Why a stale response was served.
    enum StaleReason: String, Sendable, CaseIterable {
        /// The upstream failed (an error, or a 5xx).
        case upstreamError = "upstream_error"
        /// The upstream did not answer within the soft timeout; it goes on in the background.
        case softTimeout = "soft_timeout"
        /// The client accepts it (`max-stale`).
        case clientMaxStale = "client_max_stale"
        /// Within the response's RFC 5861 `stale-while-revalidate` window, while it is revalidated.
        case staleWhileRevalidate = "stale_while_revalidate"
    }

    struct Counters: Sendable {
        var requests: [String: Int] = [:]
        var hits: [String: Int] = [:]
        var misses = 0
        var revalidations: [String: Int] = [:]
        var staleServed: [StaleReason: Int] = [:]
        var refreshAhead = 0
        var upstreamRequests = 0
        var upstreamFailures = 0
        var stored = 0
        var notStored = 0
        var coalesced = 0
        var lockAcquired = 0
        var lockWaits = 0
        var lockWaitTimeouts = 0
        var lockUnavailable = 0
        var notificationsSent = 0
        var invalidations: [String: Int] = [:]
    }

    private let counters = Locked(Counters())
    /// Memory hits answered on the fast path: an atomic, not the lock, since every event loop
    /// counts one per hit and a thread preempted while holding the lock would stall the others'
    /// hits behind it. Folded into `requests["read"]` and `hits["memory"]` by ``snapshot``.
    private let fastMemoryHits = ManagedAtomic<Int>(0)

    func count(_ update: (inout Counters) -> Void) {
        counters.withLock { update(&$0) }
    }

    /// One read answered from the memory tier on the fast path.
    func countFastMemoryHit() {
        fastMemoryHits.wrappingIncrement(ordering: .relaxed)
    }

    var snapshot: Counters {
        var counters = counters.withLock { $0 }
        let fast = fastMemoryHits.load(ordering: .relaxed)
        counters.requests["read", default: 0] += fast
        counters.hits["memory", default: 0] += fast
        return counters
    }

    /// The counters and the cache's own figures, in Prometheus' text exposition format.
    func exposition(node: String, backplane: TieredStoreBackplaneFigures) -> String {
        let counters = snapshot
        var lines: [String] = []
        func metric(_ name: String, _ help: String, _ type: String = "counter", _ samples: [(labels: String, value: Int)]) {
            lines.append("# HELP \(name) \(help)")
            lines.append("# TYPE \(name) \(type)")
            for sample in samples {
                let labels = sample.labels.isEmpty ? "node=\"\(node)\"" : "node=\"\(node)\",\(sample.labels)"
                lines.append("\(name){\(labels)} \(sample.value)")
            }
        }
        func labelled(_ key: String, _ values: [String: Int], _ all: [String]) -> [(labels: String, value: Int)] {
            all.map { ("\(key)=\"\($0)\"", values[$0, default: 0]) }
        }
        metric("strata_proxy_requests_total", "Requests received, by kind.", "counter",
               labelled("kind", counters.requests, ["read", "write", "admin"]))
        metric("strata_proxy_hits_total", "Reads answered fresh from the cache, by tier.", "counter",
               labelled("tier", counters.hits, ["memory", "shared"]))
        metric("strata_proxy_misses_total", "Reads the cache had no usable response for.", "counter", [("", counters.misses)])
        metric("strata_proxy_revalidations_total", "Stale responses revalidated with the upstream, by outcome.", "counter",
               labelled("outcome", counters.revalidations, ["not_modified", "changed"]))
        metric("strata_proxy_stale_served_total", "Stale responses served, by reason.", "counter",
               StaleReason.allCases.map { ("reason=\"\($0.rawValue)\"", counters.staleServed[$0, default: 0]) })
        metric("strata_proxy_refresh_ahead_total", "Background revalidations started by a hit near the end of its lifetime.",
               "counter", [("", counters.refreshAhead)])
        metric("strata_proxy_upstream_requests_total", "Requests sent to the upstream.", "counter", [("", counters.upstreamRequests)])
        metric("strata_proxy_upstream_failures_total", "Upstream requests that failed (no answer, or a 5xx).", "counter",
               [("", counters.upstreamFailures)])
        metric("strata_proxy_stored_total", "Responses stored.", "counter", [("", counters.stored)])
        metric("strata_proxy_not_stored_total", "Responses RFC 9111 forbade storing (private, no-store, ...).", "counter",
               [("", counters.notStored)])
        metric("strata_proxy_coalesced_total", "Reads that waited for another request of this node to fetch their key.",
               "counter", [("", counters.coalesced)])
        metric("strata_proxy_lock_acquired_total", "Fleet locks taken for a miss.", "counter", [("", counters.lockAcquired)])
        metric("strata_proxy_lock_waits_total", "Misses that waited for another node's fleet lock.", "counter", [("", counters.lockWaits)])
        metric("strata_proxy_lock_wait_timeouts_total", "Waits for a fleet lock that timed out (the node then fetched anyway).",
               "counter", [("", counters.lockWaitTimeouts)])
        metric("strata_proxy_lock_unavailable_total", "Misses fetched without a lock because the lock could not be asked.",
               "counter", [("", counters.lockUnavailable)])
        metric("strata_proxy_notifications_sent_total", "Writes and invalidations this node announced to the fleet.",
               "counter", [("", counters.notificationsSent)])
        metric("strata_proxy_invalidations_total", "Invalidations this node made, by cause.", "counter",
               labelled("cause", counters.invalidations, ["unsafe_method", "tag", "prefix", "clear"]))
        metric("strata_backplane_events_total", "Backplane events handled (notifications received and listening starts).",
               "counter", [("", backplane.events)])
        metric("strata_backplane_own_notifications_total", "This node's own notifications, received back and ignored.",
               "counter", [("", backplane.ownIgnored)])
        metric("strata_backplane_copies_dropped_total", "Memory copies dropped because another node changed their key.",
               "counter", [("", backplane.copiesDropped)])
        metric("strata_backplane_invalidations_received_total", "Invalidations by other nodes (each empties the memory tier).",
               "counter", [("", backplane.invalidations)])
        metric("strata_backplane_listening_starts_total", "Times the backplane (re)started listening.", "counter",
               [("", backplane.listeningStarts)])
        metric("strata_shared_tier_repairs_queued", "Writes waiting for the shared tier to come back.", "gauge",
               [("", backplane.unsentWrites)])
        metric("strata_shared_tier_down", "1 while the shared tier is unreachable.", "gauge", [("", backplane.sharedTierDown ? 1 : 0)])
        metric("strata_proxy_memory_entries", "Responses the memory tier holds (--memory-entries bounds them).", "gauge",
               [("", backplane.memoryEntries)])
        metric("strata_proxy_memory_bytes", "Bytes the memory tier holds as its budget counts them (--memory-bytes bounds them).",
               "gauge", [("", backplane.memoryBytes)])
        return lines.joined(separator: "\n") + "\n"
    }
}

/// The figures of the node's ``TieredStore`` that `/_strata/metrics` reports.
struct TieredStoreBackplaneFigures: Sendable {
    var events = 0
    var ownIgnored = 0
    var copiesDropped = 0
    var invalidations = 0
    var listeningStarts = 0
    var unsentWrites = 0
    var sharedTierDown = false
    /// Responses in the memory tier, and their bytes as its budget counts them.
    var memoryEntries = 0
    var memoryBytes = 0
}
