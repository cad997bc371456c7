import Foundation
@_spi(StrataInternals) import Strata
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One ``Outbox`` in one process, as the other processes sharing its storage see it when it claims
/// a scope to drain.
public struct OutboxClaimant: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Random, one per ``Outbox`` instance: two outboxes of one process are two claimants.
    public var id: UUID
    /// The process it lives in.
    public var processID: Int32
    /// The machine and PID namespace the process ID means something in (the boot id and the PID
    /// namespace on Linux, the boot time elsewhere), or `""` when unknown: a process ID is checked
    /// for life only by a claimant of the same host.
    public var host: String

    /// A claimant with these parts (tests make claimants of other "processes" this way).
    public init(id: UUID = UUID(), processID: Int32, host: String) {
        self.id = id
        self.processID = processID
        self.host = host
    }

    /// A new claimant in this process.
    public static func thisProcess() -> OutboxClaimant {
        OutboxClaimant(processID: getpid(), host: hostIdentity)
    }

    public var description: String { "outbox \(id.uuidString.prefix(8).lowercased()) in process \(processID)" }

    /// Whether the process of `claimant` is known to be gone, seen from this process: only for a
    /// claimant of this host (and PID namespace), whose process ID no longer exists. A process that
    /// exists (or that this process may not signal) is taken to be alive; its claim then lasts until
    /// it expires.
    public static func isGone(_ claimant: OutboxClaimant) -> Bool {
        guard !claimant.host.isEmpty, claimant.host == hostIdentity, claimant.processID > 0 else { return false }
        if claimant.processID == getpid() { return false }
        return kill(claimant.processID, 0) != 0 && errno == ESRCH
    }

    /// This process's host identity (see `host`).
    static let hostIdentity: String = {
        #if os(Linux)
        let boot = (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        var info = stat()
        let namespace = stat("/proc/self/ns/pid", &info) == 0 ? "\(info.st_ino)" : ""
        return boot.isEmpty || namespace.isEmpty ? "" : "\(boot)/pid:\(namespace)"
        #elseif canImport(Darwin)
        var boot = timeval()
        var size = MemoryLayout<timeval>.size
        guard sysctlbyname("kern.boottime", &boot, &size, nil, 0) == 0 else { return "" }
        return "boot:\(boot.tv_sec).\(boot.tv_usec)"
        #else
        return ""
        #endif
    }()
}

/// A claim on one scope of a shared outbox storage: who drains it, and until when at the latest.
public struct OutboxScopeClaim: Sendable, Hashable, Codable {
    /// Who holds it.
    public var claimant: OutboxClaimant
    /// When it lapses unless renewed: a claimant that stops (suspended, killed on another host, cut
    /// from the database) holds the scope no longer than this.
    public var expiresAt: Date

    /// A claim held by `claimant` until `expiresAt`.
    public init(claimant: OutboxClaimant, expiresAt: Date) {
        self.claimant = claimant
        self.expiresAt = expiresAt
    }
}

/// What a claim on a scope found.
public enum OutboxClaimOutcome: Sendable, Hashable {
    /// The scope is this claimant's until the date it asked for (taken, or renewed).
    case claimed
    /// Another live claimant drains the scope; its claim lapses at the date given.
    case heldElsewhere(OutboxScopeClaim)
}

/// The one rule every storage applies when a claimant asks for a scope, under whatever makes its
/// read-and-write of the claim atomic (a file lock, a transaction): free, lapsed, held by a process
/// known to be gone, or already the claimant's own → take it; otherwise it is held elsewhere. Pure:
/// `isGone` is the only outside fact, and it is given.
public enum OutboxClaimRule {
    /// The claim to store (`claimed`), or the one that stands (`heldElsewhere`).
    public static func decide(
        held: OutboxScopeClaim?, by claimant: OutboxClaimant, until expiresAt: Date, now: Date,
        isGone: (OutboxClaimant) -> Bool = OutboxClaimant.isGone
    ) -> (outcome: OutboxClaimOutcome, store: OutboxScopeClaim?) {
        if let held, held.claimant.id != claimant.id, held.expiresAt > now, !isGone(held.claimant) {
            return (.heldElsewhere(held), nil)
        }
        return (.claimed, OutboxScopeClaim(claimant: claimant, expiresAt: expiresAt))
    }

    /// Whether a release by `claimant` removes `held` (only its own claim: a lapsed claim that
    /// another claimant has taken since stays).
    public static func releases(_ held: OutboxScopeClaim?, by claimant: OutboxClaimant) -> Bool {
        held?.claimant.id == claimant.id
    }
}
