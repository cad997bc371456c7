import PostgresNIO
import Strata
