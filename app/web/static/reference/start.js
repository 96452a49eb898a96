// The browsable API reference: Swagger UI over the service's own document. "Try it out" sends
// requests from this page with the token given under "Authorize".
window.ui = SwaggerUIBundle({
  url: "/v1/api/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  validatorUrl: null, // no third-party validator badge: nothing leaves this service
});
