/// The version of Veneer: what `veneer version` prints and `/-/health` answers.
public enum VeneerVersion {
    /// `MAJOR.MINOR.PATCH`; `packaging/debian/changelog` must agree (`make deb` checks).
    public static let text = "0.1.0"
}
