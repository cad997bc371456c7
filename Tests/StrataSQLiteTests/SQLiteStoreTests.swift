import StrataSQLite
import Testing
