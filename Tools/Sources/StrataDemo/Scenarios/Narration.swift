/// Phrases the scenarios share, so every narration reads the same way.
enum Narration {
    /// What the network did during a step: `no request made`, `1 request sent, no answer`, …
    static func network(sent: Int, answered: Int) -> String {
        switch (sent, answered) {
        case (0, _): "no request made"
        case (let sent, 0): "\(sent) request sent, no answer"
        case (let sent, let answered): "\(sent) request sent, \(answered) answered"
        }
    }
}
