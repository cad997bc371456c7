import GRDB
import Strata
