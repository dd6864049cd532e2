package io.lakebus.connect;

/** The plugin's version from its jar manifest (Maven writes it), shown by Connect's plugin listing. */
final class PluginVersion {
    private PluginVersion() {
    }

    static String get() {
        String version = PluginVersion.class.getPackage().getImplementationVersion();
        return version == null ? "dev" : version;
    }
}
