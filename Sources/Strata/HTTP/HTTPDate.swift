import Foundation

/// HTTP dates (RFC 9110 §5.6.7), as in `Date`, `Expires`, `Last-Modified`, `If-Modified-Since` and
/// `Retry-After`.
///
/// ```swift
/// HTTPDate.string(from: Date(timeIntervalSince1970: 784_111_777))  // "Sun, 06 Nov 1994 08:49:37 GMT"
/// HTTPDate.date(from: "Sunday, 06-Nov-94 08:49:37 GMT")              // the same instant
/// ```
///
/// Formatting writes the preferred form, IMF-fixdate. Parsing accepts all three forms a recipient
/// must accept: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 form
/// (`Sunday, 06-Nov-94 08:49:37 GMT`, a two-digit year more than 50 years ahead read as the past
/// century's) and C's `asctime()` form (`Sun Nov  6 08:49:37 1994`). Where Foundation has
/// `Date.HTTPFormatStyle` (macOS 26, iOS 26 and later), IMF-fixdate goes through it; that style does
/// not read the two obsolete forms, so they always go through Strata's own parser.
public enum HTTPDate {
    /// `date` in IMF-fixdate form, such as `Sun, 06 Nov 1994 08:49:37 GMT` (whole seconds, GMT).
    public static func string(from date: Date) -> String {
        #if canImport(Darwin) && compiler(>=6.2)
        if #available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *) {
            return date.formatted(Date.HTTPFormatStyle())
        }
        #endif
        return format(date)
    }

    /// The instant an HTTP date names, in any of the three forms; `nil` when `text` is none of them.
    /// Spaces and tabs around `text` are ignored.
    public static func date(from text: String) -> Date? {
        date(from: text, now: Date())
    }

    /// `date(from:)`, reading RFC 850's two-digit years relative to `now`.
    static func date(from text: String, now: Date) -> Date? {
        let trimmed = text.trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
        #if canImport(Darwin) && compiler(>=6.2)
        if #available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *),
           let date = try? Date.HTTPFormatStyle().parse(trimmed) {
            return date
        }
        #endif
        var parser = Parser(Array(trimmed.utf8))
        guard let fields = parser.imfFixdate() ?? parser.rfc850(now: now) ?? parser.asctime() else { return nil }
        return fields.date
    }

    // MARK: Fallback formatting and parsing (no calendar or locale involved: the format is fixed)

    private static let dayNames = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let longDayNames = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
    private static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    static func format(_ date: Date) -> String {
        let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
        let (days, secondOfDay) = seconds.quotientAndRemainderFloored(by: 86_400)
        let (year, month, day) = civil(fromDays: days)
        let weekday = Int((days + 4).quotientAndRemainderFloored(by: 7).remainder)  // 1970-01-01 was a Thursday
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let paddedYear = String(repeating: "0", count: max(0, 4 - String(year).count)) + String(year)
        return "\(dayNames[weekday]), \(two(day)) \(monthNames[Int(month) - 1]) \(paddedYear) "
            + "\(two(secondOfDay / 3600)):\(two(secondOfDay % 3600 / 60)):\(two(secondOfDay % 60)) GMT"
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
    static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The proleptic Gregorian date `days` after 1970-01-01 (the inverse of `days(fromCivil:_:_:)`).
    static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    struct Fields {
        var year: Int64, month: Int64, day: Int64, hour: Int64, minute: Int64, second: Int64

        /// `nil` for a day the month does not have, or a time out of range.
        var date: Date? {
            let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
            let monthDays: [Int64] = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
            guard (1...12).contains(month), (1...monthDays[Int(month) - 1]).contains(day),
                  (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
            else { return nil }
            // Foundation has no leap seconds; :60 reads as :59, as `Date.HTTPFormatStyle` does.
            let seconds = HTTPDate.days(fromCivil: year, month, day) * 86_400 + hour * 3600 + minute * 60 + min(second, 59)
            return Date(timeIntervalSince1970: TimeInterval(seconds))
        }
    }

    /// Reads one form at a time over the UTF-8 bytes; each form restarts from the beginning.
    struct Parser {
        let bytes: [UInt8]
        var index = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        /// `Sun, 06 Nov 1994 08:49:37 GMT`
        mutating func imfFixdate() -> Fields? {
            index = 0
            guard word(in: HTTPDate.dayNames) != nil, literal(", "), let day = digits(2), literal(" "),
                  let month = word(in: HTTPDate.monthNames), literal(" "), let year = digits(4), literal(" "),
                  let time = timeOfDay(), literal(" GMT"), index == bytes.count
            else { return nil }
            return Fields(year: year, month: Int64(month) + 1, day: day, hour: time.0, minute: time.1, second: time.2)
        }

        /// `Sunday, 06-Nov-94 08:49:37 GMT`
        mutating func rfc850(now: Date) -> Fields? {
            index = 0
            guard word(in: HTTPDate.longDayNames) != nil, literal(", "), let day = digits(2), literal("-"),
                  let month = word(in: HTTPDate.monthNames), literal("-"), let twoDigitYear = digits(2), literal(" "),
                  let time = timeOfDay(), literal(" GMT"), index == bytes.count
            else { return nil }
            // RFC 9110: a year that appears to be more than 50 years in the future is the most recent
            // past year with the same last two digits.
            let currentYear = HTTPDate.civil(fromDays: Int64((now.timeIntervalSince1970 / 86_400).rounded(.down))).year
            var year = currentYear - currentYear % 100 + twoDigitYear
            if year > currentYear + 50 { year -= 100 }
            return Fields(year: year, month: Int64(month) + 1, day: day, hour: time.0, minute: time.1, second: time.2)
        }

        /// `Sun Nov  6 08:49:37 1994` (the day is two digits, or a space and one digit)
        mutating func asctime() -> Fields? {
            index = 0
            guard word(in: HTTPDate.dayNames) != nil, literal(" "), let month = word(in: HTTPDate.monthNames),
                  literal(" ")
            else { return nil }
            let day: Int64
            if literal(" "), let single = digits(1) { day = single } else if let double = digits(2) { day = double } else { return nil }
            guard literal(" "), let time = timeOfDay(), literal(" "), let year = digits(4), index == bytes.count else { return nil }
            return Fields(year: year, month: Int64(month) + 1, day: day, hour: time.0, minute: time.1, second: time.2)
        }

        private mutating func timeOfDay() -> (Int64, Int64, Int64)? {
            guard let hour = digits(2), literal(":"), let minute = digits(2), literal(":"), let second = digits(2) else { return nil }
            return (hour, minute, second)
        }

        /// Exactly `count` ASCII digits.
        private mutating func digits(_ count: Int) -> Int64? {
            guard index + count <= bytes.count else { return nil }
            var value: Int64 = 0
            for byte in bytes[index..<index + count] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
            }
            index += count
            return value
        }

        /// The position in `words` of the one that comes next (case-sensitive, as RFC 9110 spells them).
        private mutating func word(in words: [String]) -> Int? {
            for (position, candidate) in words.enumerated() where literal(candidate) { return position }
            return nil
        }

        private mutating func literal(_ text: String) -> Bool {
            let expected = Array(text.utf8)
            guard index + expected.count <= bytes.count, bytes[index..<index + expected.count].elementsEqual(expected) else { return false }
            index += expected.count
            return true
        }
    }
}

extension Int64 {
    fileprivate func quotientAndRemainderFloored(by divisor: Int64) -> (quotient: Int64, remainder: Int64) {
        let (q, r) = quotientAndRemainder(dividingBy: divisor)
        return r < 0 ? (q - 1, r + divisor) : (q, r)
    }
}
