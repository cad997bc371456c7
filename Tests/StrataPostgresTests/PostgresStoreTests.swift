import StrataPostgres
import Testing
