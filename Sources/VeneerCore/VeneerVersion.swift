/// The version of Veneer: what `veneer version` prints and `/-/health` answers.
public enum VeneerVersion {
    /// `MAJOR.MINOR.PATCH`; `packaging/debian/changelog` must agree (`make deb` checks).
    public static let text = "0.1.0"

    /// The license Veneer is distributed under, as an SPDX identifier (the `LICENSE` file).
    public static let license = "Apache-2.0"

    /// What `veneer version` and `veneer --version` print: the name and version on the first
    /// line, the license on the second.
    public static let banner = "veneer \(text)\nLicensed under the Apache License, Version 2.0 (\(license))."
}
