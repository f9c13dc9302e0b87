{{- /*
The webhooks the policy needs, as `jobwarden webhooks` renders them (crates/admission/src/
registration.rs decides; tests/deploy/registration.rs holds this template to that binary's output
for a table of policies). Each webhook is sent only the requests whose answer jobwarden can change
under the policy, and fails closed on exactly those
(docs/operations.md#what-reaches-the-webhook). The argument is (list $ caBundle); the result is
YAML: {mutating: [...], validating: [...]}.
*/ -}}
{{- define "jobwarden.webhooks" -}}
{{- $ := index . 0 -}}
{{- $caBundle := index . 1 -}}
{{- $fullname := include "jobwarden.fullname" $ -}}
{{- $w := $.Values.webhooks -}}
{{- $p := $.Values.policy | default dict -}}
{{- $suspend := $p.suspendOnCreate | default dict -}}
{{- $delegate := $p.delegate | default dict -}}
{{- $delegated := $delegate.namespaces | default dict -}}
{{- $dispatched := $delegate.dispatchNamespaces | default dict -}}
{{- $dispatch := $p.dispatch | default dict -}}
{{- $resume := $p.resume | default dict -}}
{{- $excluded := concat (list "kube-system" $.Release.Namespace) $w.excludedNamespaces | uniq -}}
{{- $exclusions := list (dict "key" "kubernetes.io/metadata.name" "operator" "NotIn" "values" $excluded) (dict "key" "jobwarden.io/admission" "operator" "NotIn" "values" (list "disabled")) -}}
{{- /* Defaulting podReplacementPolicy where the API server has not (none on v1.36), and
delegate.jobsNamingRules for a Job naming its rules that picks no controller. */ -}}
{{- $mayMutate := "!(has(object.spec.podReplacementPolicy))" -}}
{{- if $delegate.jobsNamingRules -}}
{{- $mayMutate = printf "%s || ((has(object.metadata.annotations) && 'jobwarden.io/pod-failure-policy-rule-names' in object.metadata.annotations) && !(has(object.spec.managedBy)))" $mayMutate -}}
{{- end -}}
{{- /* jobwarden's annotations on either object, the suspend of a finished Job; the resume
policy only for resumes; the managedBy allow-list only for creates naming another controller
(the dispatcher's name is allowed as jobwarden's own once it has workers). */ -}}
{{- $hasRule := "(has(object.metadata.annotations) && object.metadata.annotations.exists(k, k.startsWith('jobwarden.io/'))) || (oldObject != null && has(oldObject.metadata.annotations) && oldObject.metadata.annotations.exists(k, k.startsWith('jobwarden.io/'))) || ((has(object.spec.suspend) && object.spec.suspend == true) && !(oldObject != null && has(oldObject.spec.suspend) && oldObject.spec.suspend == true) && (oldObject != null && has(oldObject.status) && has(oldObject.status.conditions) && oldObject.status.conditions.exists(c, (c.type == 'Complete' || c.type == 'Failed') && c.status == 'True')))" -}}
{{- if or $resume.users $resume.groups $resume.serviceAccounts -}}
{{- $hasRule = printf "%s || ((oldObject != null && has(oldObject.spec.suspend) && oldObject.spec.suspend == true) && !(has(object.spec.suspend) && object.spec.suspend == true))" $hasRule -}}
{{- end -}}
{{- with $p.allowedManagedBy -}}
{{- $known := list ($p.controllerName | default "jobwarden.io/job-controller") "kubernetes.io/job-controller" -}}
{{- if $dispatch.workers -}}
{{- $known = append $known ($dispatch.controllerName | default "jobwarden.io/dispatcher") -}}
{{- end -}}
{{- $known = concat $known . | uniq -}}
{{- $quoted := list -}}
{{- range $known -}}
{{- $quoted = append $quoted (printf "'%s'" (. | replace "\\" "\\\\" | replace "'" "\\'")) -}}
{{- end -}}
{{- $hasRule = printf "%s || (request.operation == 'CREATE' && (has(object.spec.managedBy) && !(object.spec.managedBy in [%s])))" $hasRule (join ", " $quoted) -}}
{{- end -}}
{{- $changed := "request.operation != 'UPDATE' || object.spec != oldObject.spec || has(object.metadata.annotations) != has(oldObject.metadata.annotations) || (has(object.metadata.annotations) && object.metadata.annotations != oldObject.metadata.annotations)" -}}
{{- /* One webhook per namespace scope: a webhook has one namespaceSelector, whose
requirements all hold at once. */ -}}
{{- $hooks := list (dict "name" "mutate.jobs.jobwarden.io" "path" "/mutate" "operations" (list "CREATE") "resource" "jobs" "conditions" (list (dict "name" "jobwarden-may-mutate" "expression" $mayMutate))) -}}
{{- $names := concat ($suspend.names | default list) ($delegated.names | default list) ($dispatched.names | default list) | uniq | sortAlpha -}}
{{- if $names -}}
{{- $hooks = append $hooks (dict "name" "mutate-namespaces.jobs.jobwarden.io" "path" "/mutate" "operations" (list "CREATE") "resource" "jobs" "expressions" (list (dict "key" "kubernetes.io/metadata.name" "operator" "In" "values" $names))) -}}
{{- end -}}
{{- range list (list "mutate-suspend-on-create.jobs.jobwarden.io" $suspend.selector) (list "mutate-delegate.jobs.jobwarden.io" $delegated.selector) (list "mutate-dispatch.jobs.jobwarden.io" $dispatched.selector) -}}
{{- $name := index . 0 -}}
{{- with index . 1 -}}
{{- $hooks = append $hooks (dict "name" $name "path" "/mutate" "operations" (list "CREATE") "resource" "jobs" "labels" (.matchLabels | default dict) "expressions" (.matchExpressions | default list)) -}}
{{- end -}}
{{- end -}}
{{- $hooks = append $hooks (dict "name" "validate.jobs.jobwarden.io" "path" "/validate" "operations" (list "CREATE" "UPDATE") "resource" "jobs" "conditions" (list (dict "name" "jobwarden-has-a-rule" "expression" $hasRule) (dict "name" "create-or-spec-or-annotations-changed" "expression" $changed))) -}}
{{- $hooks = append $hooks (dict "name" "validate-status.jobs.jobwarden.io" "path" "/validate" "operations" (list "UPDATE") "resource" "jobs/status" "conditions" (list (dict "name" "managed-by-another-controller" "expression" "has(object.spec.managedBy) && !(object.spec.managedBy in ['kubernetes.io/job-controller'])") (dict "name" "status-changed" "expression" "has(object.status) != has(oldObject.status) || (has(object.status) && object.status != oldObject.status)"))) -}}
{{- $mutating := list -}}
{{- $validating := list -}}
{{- range $hooks -}}
{{- $service := dict "name" $fullname "namespace" $.Release.Namespace "path" .path "port" 443 -}}
{{- $client := dict "service" $service -}}
{{- with $caBundle }}{{ $_ := set $client "caBundle" . }}{{ end -}}
{{- $labels := merge (deepCopy (.labels | default dict)) ($w.namespaceSelector.matchLabels | default dict) -}}
{{- $selector := dict "matchExpressions" (concat $exclusions (.expressions | default list) ($w.namespaceSelector.matchExpressions | default list)) -}}
{{- with $labels }}{{ $_ := set $selector "matchLabels" . }}{{ end -}}
{{- $hook := dict "name" .name "admissionReviewVersions" (list "v1") "sideEffects" "None" "timeoutSeconds" $w.timeoutSeconds "failurePolicy" "Fail" "matchPolicy" "Equivalent" "clientConfig" $client "rules" (list (dict "apiGroups" (list "batch") "apiVersions" (list "v1") "operations" .operations "resources" (list .resource) "scope" "Namespaced")) "namespaceSelector" $selector -}}
{{- with .conditions }}{{ $_ := set $hook "matchConditions" . }}{{ end -}}
{{- if eq .path "/mutate" -}}
{{- $_ := set $hook "reinvocationPolicy" "Never" -}}
{{- $mutating = append $mutating $hook -}}
{{- else -}}
{{- $validating = append $validating $hook -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "mutating" $mutating "validating" $validating) -}}
{{- end -}}
