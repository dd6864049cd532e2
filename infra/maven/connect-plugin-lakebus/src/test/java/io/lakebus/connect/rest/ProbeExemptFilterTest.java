package io.lakebus.connect.rest;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.List;
import jakarta.ws.rs.container.ContainerRequestContext;
import jakarta.ws.rs.container.ContainerRequestFilter;
import jakarta.ws.rs.core.UriInfo;
import org.junit.jupiter.api.Test;

class ProbeExemptFilterTest {

    private static ContainerRequestContext request(String method, String path) {
        UriInfo uri = (UriInfo) Proxy.newProxyInstance(UriInfo.class.getClassLoader(), new Class<?>[] {UriInfo.class},
            (proxy, m, args) -> {
                if (m.getName().equals("getPath")) {
                    return path;
                }
                throw new UnsupportedOperationException(m.getName());
            });
        return (ContainerRequestContext) Proxy.newProxyInstance(ContainerRequestContext.class.getClassLoader(),
            new Class<?>[] {ContainerRequestContext.class}, (proxy, m, args) -> {
                switch (m.getName()) {
                    case "getMethod":
                        return method;
                    case "getUriInfo":
                        return uri;
                    case "toString":
                        return method + " " + path;
                    default:
                        throw new UnsupportedOperationException(m.getName());
                }
            });
    }

    private static List<String> authenticated(String method, String path) throws Exception {
        List<String> seen = new ArrayList<>();
        ContainerRequestFilter authenticate = r -> seen.add(r.getMethod() + " " + r.getUriInfo().getPath());
        new ProbeExemptFilter(authenticate).filter(request(method, path));
        return seen;
    }

    @Test
    void theProbesPassWithoutAuthentication() throws Exception {
        for (String path : new String[] {"", "/", "health", "/health"}) {
            assertEquals(List.of(), authenticated("GET", path), path);
        }
    }

    @Test
    void everythingElseIsAuthenticated() throws Exception {
        for (String path : new String[] {"connectors", "/connectors", "connector-plugins", "admin/loggers", "connectors/x/offsets",
            "healthz", "health/x", "/connectors/health"}) {
            assertEquals(List.of("GET " + path), authenticated("GET", path), path);
        }
        assertEquals(List.of("POST /"), authenticated("POST", "/"));
        assertEquals(List.of("PUT health"), authenticated("PUT", "health"));
        assertEquals(List.of("DELETE /health"), authenticated("DELETE", "/health"));
    }

    @Test
    void isProbeIsExactlyGetOfTheRootOrHealth() {
        assertTrue(ProbeExemptFilter.isProbe("GET", "/health"));
        assertFalse(ProbeExemptFilter.isProbe("HEAD", "/health"));
        assertFalse(ProbeExemptFilter.isProbe("GET", "/connectors"));
    }
}
