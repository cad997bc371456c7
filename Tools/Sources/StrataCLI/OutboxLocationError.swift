/// Why ``OutboxLocation`` could not open its storage.
enum OutboxLocationError: Error, CustomStringConvertible {
    /// `--store postgres` without a database URL.
    case missingPostgresURL

    var description: String {
        switch self {
        case .missingPostgresURL:
            "--store postgres needs --postgres-url or the STRATA_POSTGRES_URL environment variable"
        }
    }
}
