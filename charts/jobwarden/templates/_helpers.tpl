{{/*
Names. With the release named jobwarden (as in the docs) every object has deploy/'s name.
*/}}
{{- define "jobwarden.name" -}}
{{- .Chart.Name -}}
{{- end -}}

{{- define "jobwarden.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "jobwarden.controllerName" -}}
{{- printf "%s-controller" (include "jobwarden.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "jobwarden.hooksName" -}}
{{- printf "%s-hooks" (include "jobwarden.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "jobwarden.tlsSecret" -}}
{{- if .Values.tls.certManager.enabled -}}
{{- printf "%s-tls" (include "jobwarden.fullname" .) -}}
{{- else -}}
{{- required "tls.existingSecret is required when tls.certManager.enabled is false" .Values.tls.existingSecret -}}
{{- end -}}
{{- end -}}

{{/*
Labels on every object. The selectors use app.kubernetes.io/name alone, as deploy/ does, so an
install can move between kustomize and Helm without a new selector (selectors are immutable).
*/}}
{{- define "jobwarden.labels" -}}
app.kubernetes.io/part-of: jobwarden
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
metadata.labels and metadata.annotations of an object; the argument is (list $ "name"), or
(list $ "name" annotations) for annotations of its own beside commonAnnotations.
*/}}
{{- define "jobwarden.metadata" -}}
{{- $ := index . 0 -}}
{{- $annotations := deepCopy $.Values.commonAnnotations -}}
{{- if gt (len .) 2 }}{{ $annotations = merge (deepCopy (index . 2)) $annotations }}{{ end -}}
labels:
  app.kubernetes.io/name: {{ index . 1 }}
  {{- if eq (index . 1) (include "jobwarden.controllerName" $) }}
  app.kubernetes.io/component: controller
  {{- end }}
  {{- include "jobwarden.labels" $ | nindent 2 }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "jobwarden.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* The pod securityContext and the container's, as the restricted Pod Security profile asks. */}}
{{- define "jobwarden.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "jobwarden.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* Spreading across nodes and zones; the argument is (list $ "name" .topologySpreadConstraints). */}}
{{- define "jobwarden.topologySpread" -}}
{{- $name := index . 1 -}}
{{- $given := index . 2 -}}
{{- if kindIs "invalid" $given }}
- maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      app.kubernetes.io/name: {{ $name }}
- maxSkew: 1
  topologyKey: topology.kubernetes.io/zone
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      app.kubernetes.io/name: {{ $name }}
{{- else }}
{{ toYaml $given }}
{{- end }}
{{- end -}}

{{/* The probes, on the metrics port. */}}
{{- define "jobwarden.probes" -}}
{{- $scheme := ternary "HTTPS" "HTTP" .Values.metrics.secure -}}
# The metrics port speaks HTTPS unless metrics.secure is false; the kubelet probes it without
# credentials, which /healthz and /readyz accept, and without checking the certificate.
readinessProbe:
  httpGet:
    path: /readyz
    port: metrics
    scheme: {{ $scheme }}
  periodSeconds: 5
  failureThreshold: 2
  timeoutSeconds: 2
livenessProbe:
  httpGet:
    path: /healthz
    port: metrics
    scheme: {{ $scheme }}
  initialDelaySeconds: 5
  periodSeconds: 10
  failureThreshold: 3
  timeoutSeconds: 2
{{- end -}}

{{/* A hook Job's kubectl container, but for its name and args. */}}
{{- define "jobwarden.hookContainer" -}}
image: {{ .image }}
imagePullPolicy: {{ .pullPolicy }}
env:
  - name: HOME
    value: /home/kubectl
volumeMounts:
  - name: home
    mountPath: /home/kubectl
resources:
  {{- toYaml .resources | nindent 2 }}
securityContext:
  {{- include "jobwarden.containerSecurityContext" . | nindent 2 }}
{{- end -}}

{{/*
The kubeconfig Secrets the policy's dispatch.workers name, sorted and each once, as a JSON
array: the names the dispatcher's Role on Secrets grants (templates/rbac.yaml).
*/}}
{{- define "jobwarden.workerSecrets" -}}
{{- $names := list -}}
{{- range ((.Values.policy | default dict).dispatch | default dict).workers | default list -}}
{{- with .kubeconfigSecret -}}
{{- $names = append $names . -}}
{{- end -}}
{{- end -}}
{{- $names | uniq | sortAlpha | toJson -}}
{{- end }}
