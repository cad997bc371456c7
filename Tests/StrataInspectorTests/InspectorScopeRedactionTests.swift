#if Inspector
import Foundation
import Testing
@_spi(StrataInternals) import Strata
import StrataOutbox
@testable import StrataInspector

/// An outbox entry's scope is shown with its secrets redacted (a scope is often a URL's path, or a
/// user's token).
@Suite("StrataInspector: outbox scopes are redacted")
struct InspectorScopeRedactionTests {
    @Test func theOutboxViewRedactsScopes() async throws {
        let outbox = Outbox(storage: MemoryOutboxStorage(), name: "writes")
        outbox.connectivityChanged(isOnline: false)
        for scope in ["user/a8Fk29dLq0ZrT7xW3mNb5vYc1Qs", "https://api.example.com/v1/reset/sk_live_4eC39HqLyjWDarjtT1zdp7dc?token=abc", "/posts"] {
            try await outbox.enqueue(kind: "write", scope: scope, payload: Data())
        }
        let view = await InspectorState.OutboxView.of(outbox)
        #expect(Set(view.entries.map(\.scope)) == ["user/***", "https://api.example.com/v1/reset/***?token=***", "/posts"])
    }
}
#endif
