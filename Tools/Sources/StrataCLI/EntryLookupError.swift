/// No single entry matches an id prefix.
enum EntryLookupError: Error, CustomStringConvertible {
    case empty
    case notFound(String)
    case ambiguous(String, [String])

    var description: String {
        switch self {
        case .empty: "give an entry id (or the start of one), as 'strata outbox list' shows it"
        case .notFound(let prefix): "no entry's id starts with '\(prefix)' ('strata outbox list' shows the ids)"
        case .ambiguous(let prefix, let ids):
            "'\(prefix)' is the start of \(ids.count) ids (\(ids.joined(separator: ", "))); give more of the id"
        }
    }
}
