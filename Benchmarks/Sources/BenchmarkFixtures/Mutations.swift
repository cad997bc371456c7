import Foundation
import Strata
import StrataQueries

extension Scenarios {
    /// The server's refusal the benchmark's mutation meets on every call, described as a server's
    /// refusal is (`PostRefused` in the web demo): an error without a description is described by
    /// reflection, which alone costs about as much as the rest of the call.
    public struct Refused: Error, CustomStringConvertible {
        public var description: String { "422 Unprocessable Content" }
    }

    /// A client with a query holding ten numbers (fresh for an hour) and a mutation whose optimistic
    /// update appends its variable to them, and whose write the server refuses at once: each call
    /// sets the value, fails, and puts the value back.
    public static func refusedMutation() -> (QueryClient, Query<[Int]>, Mutation<Int, Int>) {
        let queries = QueryClient(environment: LoadEnvironment(logger: droppingInfoLogger(label: "app.queries")))
        let query = queries.query(["numbers"], policy: QueryPolicy(staleAfter: .seconds(3600)), chain: ClosureLoader { Array(0..<10) })
        let mutation = queries.mutation(
            optimistic: [.setting(["numbers"], as: [Int].self) { numbers, new in (numbers ?? []) + [new] }],
            perform: { (_: Int) -> Int in throw Refused() })
        return (queries, query, mutation)
    }
}
