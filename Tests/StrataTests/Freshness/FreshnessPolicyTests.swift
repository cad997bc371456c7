import Foundation
import Synchronization
import Testing
@testable import Strata
import StrataTesting

@Suite("FreshnessPolicy")
struct FreshnessPolicyTests {
    let storedAt = referenceDate
    let maxAge: Duration = .seconds(24 * 3600)

    @Test(arguments: [
        (-1, true),   // one second before max age
        (0, false),   // exactly at max age: expired
        (1, false),   // one second after
    ])
    func maxAge_boundary(offsetFromMaxAge: Int, fresh: Bool) {
        let now = storedAt.addingTimeInterval(24 * 3600 + TimeInterval(offsetFromMaxAge))
        #expect(FreshnessPolicy.maxAge(maxAge).isFresh(storedAt: storedAt, now: now) == fresh)
    }

    @Test func maxAge_atAgeZeroIsFresh() {
        #expect(FreshnessPolicy.maxAge(.hours(24)).isFresh(storedAt: storedAt, now: storedAt))
    }

    @Test func maxAge_treatsEntriesFromTheFutureAsExpired() {
        #expect(!FreshnessPolicy.maxAge(.hours(24)).isFresh(storedAt: storedAt, now: storedAt.addingTimeInterval(-1)))
    }

    @Test func maxAge_conveniencesAgree() {
        let now = storedAt.addingTimeInterval(59 * 60)
        #expect(FreshnessPolicy.maxAge(.minutes(60)).isFresh(storedAt: storedAt, now: now))
        #expect(!FreshnessPolicy.maxAge(.minutes(59)).isFresh(storedAt: storedAt, now: now))
        #expect(FreshnessPolicy.maxAge(.hours(1)).isFresh(storedAt: storedAt, now: now))
    }

    @Test func any_acceptsEveryAgeIncludingTheFuture() {
        for offset: TimeInterval in [-86_400, 0, 1, 10 * 365 * 86_400] {
            #expect(FreshnessPolicy.any.isFresh(storedAt: storedAt, now: storedAt.addingTimeInterval(offset)))
        }
    }

    @Test func custom_seesStoredAtNowAndAge() {
        let policy = FreshnessPolicy.custom("under 10s") { $0.age < .seconds(10) && $0.storedAt == referenceDate }
        #expect(policy.isFresh(storedAt: storedAt, now: storedAt.addingTimeInterval(9)))
        #expect(!policy.isFresh(storedAt: storedAt, now: storedAt.addingTimeInterval(10)))
        #expect(policy.description == "under 10s")
    }
}

/// Counts how often a `now` closure is called.

@Suite("CacheLoadError messages")
struct CacheLoadErrorMessageTests {
    @Test func expiredEntryFromTheFuture_saysSo() {
        let error = CacheLoadError.expired(store: "S", key: "k", storedAt: referenceDate, age: .seconds(-90), policy: "max age 1h 0m")
        #expect(error.description == "S: entry for 'k' is stamped 1m 30s in the future, so policy 'max age 1h 0m' cannot age it")
    }
}

