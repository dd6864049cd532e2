package io.lakebus.connect.rest;

import java.io.IOException;
import java.util.Set;
import jakarta.ws.rs.HttpMethod;
import jakarta.ws.rs.container.ContainerRequestContext;
import jakarta.ws.rs.container.ContainerRequestFilter;
import jakarta.ws.rs.container.PreMatching;

/**
 * Lets the health probes through unauthenticated ({@code GET /}: the worker's version, and
 * {@code GET /health}) and hands every other request to the authenticating filter. Pre-matching, as
 * the login must come before Jersey matches a resource: an anonymous request for a path that does not
 * exist gets 401 like any other, not a 404 telling which paths do (seen: 404 without it).
 */
@PreMatching
final class ProbeExemptFilter implements ContainerRequestFilter {

    /** Request paths as JAX-RS gives them (relative to the application root, with or without a slash). */
    static final Set<String> PROBE_PATHS = Set.of("", "/", "health", "/health", "health/", "/health/");

    private final ContainerRequestFilter authenticate;

    ProbeExemptFilter(ContainerRequestFilter authenticate) {
        this.authenticate = authenticate;
    }

    @Override
    public void filter(ContainerRequestContext request) throws IOException {
        if (isProbe(request.getMethod(), request.getUriInfo().getPath())) {
            return;
        }
        authenticate.filter(request);
    }

    static boolean isProbe(String method, String path) {
        return HttpMethod.GET.equals(method) && PROBE_PATHS.contains(path);
    }
}
