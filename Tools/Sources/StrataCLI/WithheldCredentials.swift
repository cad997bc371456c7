import Foundation
import Strata
import StrataOutbox

/// The credentials of an HTTP write queued by the CLI: never written to the outbox, only named there.
///
/// The outbox removes `Authorization`, `Proxy-Authorization` and `Cookie` from every request it stores
/// (``OutboxRequest``). The CLI adds one field the outbox does keep, ``markerField``, listing the names
/// of the fields it withheld, so that
/// - `strata send` can add its credentials back to its own write at each attempt (the outbox's
///   `authorize` hook), and
/// - `strata outbox list` can say which writes were queued with credentials that were not kept, and
///   `strata outbox drain -H` can give them back.
///
/// The marker is removed from the request before it is sent: it never reaches a server.
enum WithheldCredentials {
    /// The stored field naming the withheld credential fields (`Authorization, Cookie`).
    static let markerField = HTTPField.Name("Strata-Withheld-Credentials")!

    /// The fields the outbox never stores.
    static let credentialNames: Set<HTTPField.Name> = [.authorization, .proxyAuthorization, .cookie]

    /// Whether `name` is a credential field.
    static func isCredential(_ name: HTTPField.Name) -> Bool { credentialNames.contains(name) }

    /// `request` with ``markerField`` naming the credential fields it carries (the outbox drops the
    /// credentials themselves when it stores the request).
    static func marking(_ request: HTTPRequest) -> HTTPRequest {
        var request = request
        let names = request.headerFields.map(\.name).filter(isCredential)
        var unique: [String] = []
        for name in names where !unique.contains(where: { $0.lowercased() == name.canonicalName }) {
            unique.append(name.rawName)
        }
        request.headerFields[markerField] = unique.isEmpty ? nil : unique.joined(separator: ", ")
        return request
    }

    /// The credential fields an entry's request was queued with and the outbox did not keep (from
    /// its marker); empty when there were none.
    static func names(in stored: OutboxRequest) -> [String] {
        guard let marker = stored.headerFields.first(where: { $0.count == 2 && $0[0].lowercased() == markerField.canonicalName })
        else { return [] }
        return names(inMarker: marker[1])
    }

    /// The names listed by a marker's value.
    static func names(inMarker value: String) -> [String] {
        value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// The `authorize` hook: removes the marker from `request` and adds those of `credentials` whose
    /// names it lists, so each write gets back exactly the credential fields it was queued with (and no
    /// write gets a credential it was not queued with).
    static func restore(_ credentials: [HTTPField], into request: inout HTTPRequest) {
        guard let marker = request.headerFields[markerField] else { return }
        request.headerFields[markerField] = nil
        let withheld = Set(names(inMarker: marker).map { $0.lowercased() })
        for field in credentials where withheld.contains(field.name.canonicalName) {
            request.headerFields.append(field)
        }
    }
}
